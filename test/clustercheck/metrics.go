package clustercheck

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"k1m.dev/k1m/pkg/testutil"
)

// MetricsAPI wants the Metrics API to answer for every node (what kubectl
// top nodes reads): a CPU and memory sample of each, within the time
// metrics-server takes to start and scrape twice.
func MetricsAPI(ctx context.Context, t *testing.T, c Cluster) {
	t.Helper()
	list, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range list.Items {
		want = append(want, n.Name)
	}
	slices.Sort(want)
	testutil.Eventually(t, 3*time.Minute, fmt.Sprintf("the Metrics API's samples of the nodes %v", want), func() error {
		data, err := c.Client().CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%v: %s", err, data)
		}
		var metrics metricsv1beta1.NodeMetricsList
		if err := json.Unmarshal(data, &metrics); err != nil {
			return err
		}
		var got []string
		for _, m := range metrics.Items {
			if m.Usage.Cpu().IsZero() || m.Usage.Memory().IsZero() {
				return fmt.Errorf("node %s's sample has no CPU or memory: %v", m.Name, m.Usage)
			}
			got = append(got, m.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("samples of %v", got)
		}
		return nil
	})
	out, err := c.Kubectl("top", "nodes", "--no-headers")
	if err != nil || len(strings.Split(strings.TrimSpace(out), "\n")) != len(want) {
		t.Errorf("kubectl top nodes, want a line per node: %v: %s", err, out)
	}
}

// HPA is a Deployment of one pod that uses five times the CPU it requests
// (a busy loop held to 50m by its limit), behind a
// HorizontalPodAutoscaler aiming at 50% of the request: the autoscaler
// must scale it to its maximum, 2, from the Metrics API's samples.
type HPA struct {
	c         Cluster
	namespace string
}

// hpaName names the Deployment and its autoscaler.
const hpaName = "burn"

// StartHPA creates the namespace, the Deployment and its autoscaler, and
// returns at once: metrics-server's first samples take a minute from a
// cluster's start, which a test may spend on other checks.
func StartHPA(ctx context.Context, t *testing.T, c Cluster, namespace, image string) *HPA {
	t.Helper()
	client := c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": hpaName}
	one, two := int32(1), int32(2)
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: hpaName, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name: hpaName, Image: image, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", "while :; do :; done"},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
						},
					}},
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(namespace).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	target := int32(50)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: hpaName, Namespace: namespace},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: hpaName},
			MinReplicas:    &one,
			MaxReplicas:    two,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target},
			}}},
		},
	}
	if _, err := client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &HPA{c: c, namespace: namespace}
}

// WaitScaled waits for the autoscaler to have scaled the Deployment to 2,
// then deletes the namespace (the busy pods with it).
func (h *HPA) WaitScaled(ctx context.Context, t *testing.T) {
	t.Helper()
	client := h.c.Client()
	defer client.CoreV1().Namespaces().Delete(context.Background(), h.namespace, metav1.DeleteOptions{})
	testutil.Eventually(t, 3*time.Minute, "the HorizontalPodAutoscaler scaling burn to 2 on its CPU", func() error {
		a, err := client.AutoscalingV2().HorizontalPodAutoscalers(h.namespace).Get(ctx, hpaName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if a.Status.DesiredReplicas != 2 {
			return fmt.Errorf("desired replicas %d, current %d, CPU %s; conditions %s", a.Status.DesiredReplicas, a.Status.CurrentReplicas, utilization(a), conditions(a))
		}
		d, err := client.AppsV1().Deployments(h.namespace).Get(ctx, hpaName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			return fmt.Errorf("the autoscaler wants 2, the Deployment has %v", d.Spec.Replicas)
		}
		return nil
	})
}

func utilization(h *autoscalingv2.HorizontalPodAutoscaler) string {
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			return fmt.Sprintf("%d%% of the request", *m.Resource.Current.AverageUtilization)
		}
	}
	return "unknown"
}

func conditions(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var out []string
	for _, c := range h.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Message))
	}
	return fmt.Sprint(out)
}
