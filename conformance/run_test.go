package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func podWith(statuses ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: PodName, Namespace: Namespace}, Status: corev1.PodStatus{ContainerStatuses: statuses}}
}

func terminated(name string, ago time.Duration) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(time.Now().Add(-ago))}}}
}

func TestPodStoppedTellsACrashFromARunningPod(t *testing.T) {
	running := corev1.ContainerStatus{Name: workerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"both running", podWith(corev1.ContainerStatus{Name: e2eContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, running), ""},
		{"e2e just ended (done file may follow)", podWith(terminated(e2eContainer, 5*time.Second), running), ""},
		{"e2e ended long ago without results", podWith(terminated(e2eContainer, 2*time.Minute), running), "e2e container stopped (OOMKilled, exit 137)"},
		{"worker ended", podWith(terminated(workerName, time.Second)), "worker container stopped"},
		{"evicted before it ran", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: PodName, Namespace: Namespace}, Spec: corev1.PodSpec{NodeName: "k1m-server-1"},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "Pod was rejected: The node had condition: [DiskPressure]. "}},
			"the pod failed on node k1m-server-1 before its containers ran: Evicted: Pod was rejected: The node had condition: [DiskPressure]."},
	} {
		r := Runner{Client: fake.NewSimpleClientset(c.pod)}
		err := r.podStopped(context.Background())
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
