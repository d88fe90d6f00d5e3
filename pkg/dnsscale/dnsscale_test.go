package dnsscale

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestReplicasIsOnePerNodesPerReplicaAndAtLeastTwo(t *testing.T) {
	for _, c := range []struct {
		nodes, per int
		want       int32
	}{{0, 100, 2}, {1, 100, 2}, {200, 100, 2}, {201, 100, 3}, {1000, 100, 10}, {100000, 100, 1000}, {5, 1, 5}} {
		if got := Replicas(c.nodes, c.per); got != c.want {
			t.Errorf("Replicas(%d, %d) = %d, want %d", c.nodes, c.per, got, c.want)
		}
	}
}

// cluster is a fake API with nodes Nodes (a list with limit 1 answers one
// and the count left, as kube-apiserver does) and CoreDNS at replicas;
// updates records the scale updates.
func cluster(t *testing.T, nodes int, replicas int32) (*fake.Clientset, *[]autoscalingv1.Scale, *[]metav1.ListOptions) {
	t.Helper()
	client := fake.NewClientset(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: Deployment, Namespace: Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas}})
	var updates []autoscalingv1.Scale
	var lists []metav1.ListOptions
	client.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lists = append(lists, a.(k8stesting.ListActionImpl).ListOptions)
		list := &corev1.NodeList{}
		if nodes > 0 {
			left := int64(nodes - 1)
			list.Items = []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}}
			list.RemainingItemCount = &left
		}
		return true, list, nil
	})
	client.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: Deployment, Namespace: Namespace, ResourceVersion: "7"},
			Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}, nil
	})
	client.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		updates = append(updates, *s)
		return true, s, nil
	})
	return client, &updates, &lists
}

func TestSyncScalesCoreDNSToTheNodeCountReadWithOneListOfLimitOne(t *testing.T) {
	client, updates, lists := cluster(t, 1001, 2)
	s := &Scaler{Client: client, PerReplica: 100}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []autoscalingv1.Scale{{ObjectMeta: metav1.ObjectMeta{Name: Deployment, Namespace: Namespace, ResourceVersion: "7"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 11}}}
	if !reflect.DeepEqual(*updates, want) {
		t.Errorf("scale updates = %+v, want %+v", *updates, want)
	}
	if want := []metav1.ListOptions{{Limit: 1}}; !reflect.DeepEqual(*lists, want) {
		t.Errorf("node lists = %+v, want %+v", *lists, want)
	}
}

func TestSyncLeavesCoreDNSAloneAtTheRightCount(t *testing.T) {
	client, updates, _ := cluster(t, 150, 2)
	if err := (&Scaler{Client: client, PerReplica: 100}).Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(*updates) != 0 {
		t.Errorf("scale updates = %+v, want none", *updates)
	}
}

func TestSyncNamesWhatFailed(t *testing.T) {
	client, _, _ := cluster(t, 10, 2)
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is away")
	})
	err := (&Scaler{Client: client, PerReplica: 100}).Sync(context.Background())
	if want := "counting nodes: etcd is away"; fmt.Sprint(err) != want {
		t.Errorf("Sync() = %v, want %s", err, want)
	}
}

func TestInitialAgreesWithTheScalerOrKeepsTheCountWhenOff(t *testing.T) {
	ctx := context.Background()
	client, _, _ := cluster(t, 450, 7)
	if got, err := Initial(ctx, client, 100); got != 5 || err != nil {
		t.Errorf("Initial(450 nodes, 100 per replica) = %d, %v; want 5", got, err)
	}
	if got, err := Initial(ctx, client, 0); got != 7 || err != nil {
		t.Errorf("Initial(scaling off, 7 replicas set) = %d, %v; want 7", got, err)
	}
	if got, err := Initial(ctx, fake.NewClientset(), 0); got != MinReplicas || err != nil {
		t.Errorf("Initial(scaling off, no CoreDNS yet) = %d, %v; want %d", got, err, MinReplicas)
	}
}

func TestCountNodesRefusesAListWithMoreAndNoCount(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &corev1.NodeList{ListMeta: metav1.ListMeta{Continue: "next"}, Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}}}, nil
	})
	_, err := CountNodes(context.Background(), client)
	if want := "counting nodes: a list with limit 1 said there are more but not how many (no remainingItemCount)"; fmt.Sprint(err) != want {
		t.Errorf("CountNodes() error = %v, want %s", err, want)
	}
}

func TestSyncWithoutCoreDNSDoesNothing(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		left := int64(999)
		return true, &corev1.NodeList{Items: []corev1.Node{{}}, ListMeta: metav1.ListMeta{RemainingItemCount: &left}}, nil
	})
	if err := (&Scaler{Client: client, PerReplica: 100}).Sync(context.Background()); err != nil {
		t.Errorf("Sync() with no CoreDNS Deployment = %v, want nil", err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("an update with no CoreDNS Deployment: %v", a)
		}
	}
}
