package conformance

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The names of a run's objects (Sonobuoy's are sonobuoy, sonobuoy-serviceaccount, ...).
const (
	Namespace      = "k1m-conformance"
	ServiceAccount = "k1m-conformance"
	PodName        = "k1m-conformance-e2e"
	repoListMap    = "k1m-conformance-repo-list"
	// ResultsDir is where go-runner writes and the worker watches, as in Sonobuoy.
	ResultsDir = "/tmp/sonobuoy/results"
	// ProgressPort is where the worker takes e2e.test's progress updates.
	ProgressPort = "8099"
	e2eContainer = "e2e"
	workerName   = "worker"
)

// RunSpec is what one run asks of the conformance pod.
type RunSpec struct {
	Mode     Mode
	Image    string
	RepoList string // KUBE_TEST_REPO_LIST contents; empty for upstream images
	Extra    []string
}

// objects are the namespace, service account, binding, repo list and pod
// of a run. The pod holds the e2e container (go-runner) and the worker.
func (s RunSpec) objects() (*corev1.Namespace, *corev1.ServiceAccount, *rbacv1.ClusterRoleBinding, *corev1.ConfigMap, *corev1.Pod) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "k1m-conformance"}}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	sa := &corev1.ServiceAccount{ObjectMeta: meta(ServiceAccount)}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: ServiceAccount, Namespace: Namespace}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta(repoListMap), Data: map[string]string{"repo-list.yaml": s.RepoList}}
	return ns, sa, crb, cm, s.pod(meta(PodName))
}

// ginkgoArgs are go-runner's extra ginkgo flags (space-separated): the
// process count of a parallel run, a phase's label filter.
func (s RunSpec) ginkgoArgs() string {
	var args []string
	if s.Mode.Parallel && s.Mode.Procs > 0 {
		args = append(args, fmt.Sprintf("--procs=%d", s.Mode.Procs))
	}
	if s.Mode.LabelFilter != "" {
		args = append(args, "--label-filter="+s.Mode.LabelFilter)
	}
	return strings.Join(args, " ")
}

func (s RunSpec) pod(meta metav1.ObjectMeta) *corev1.Pod {
	parallel := "false"
	if s.Mode.Parallel {
		parallel = "true"
	}
	env := []corev1.EnvVar{
		{Name: "E2E_FOCUS", Value: s.Mode.Focus},
		{Name: "E2E_SKIP", Value: s.Mode.Skip},
		{Name: "E2E_PARALLEL", Value: parallel},
		{Name: "E2E_EXTRA_ARGS", Value: strings.Join(append([]string{"--progress-report-url=http://localhost:" + ProgressPort + "/progress"}, s.Extra...), " ")},
		{Name: "E2E_USE_GO_RUNNER", Value: "true"},
		{Name: "E2E_EXTRA_GINKGO_ARGS", Value: s.ginkgoArgs()},
		{Name: "RESULTS_DIR", Value: ResultsDir},
	}
	mounts := []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "results", MountPath: ResultsDir}}
	volumes := []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "results", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if s.RepoList != "" {
		env = append(env, corev1.EnvVar{Name: "KUBE_TEST_REPO_LIST", Value: "/tmp/sonobuoy/config/repo-list.yaml"})
		mounts = append(mounts, corev1.VolumeMount{Name: "repo-list", MountPath: "/tmp/sonobuoy/config"})
		volumes = append(volumes, corev1.Volume{Name: "repo-list", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: repoListMap}}}})
	}
	// The images are imported into every node; nothing is pulled.
	pull := corev1.PullIfNotPresent
	return &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			ServiceAccountName: ServiceAccount,
			RestartPolicy:      corev1.RestartPolicyNever,
			// Like Sonobuoy's plugin pods: run whatever the nodes' taints.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{
				{Name: e2eContainer, Image: s.Image, ImagePullPolicy: pull, Command: []string{"/run_e2e.sh"}, Env: env, VolumeMounts: mounts},
				{Name: workerName, Image: s.Image, ImagePullPolicy: pull,
					Command:      []string{"/usr/local/bin/k1m-conformance", "worker", "--results-dir", ResultsDir, "--listen", "localhost:" + ProgressPort},
					VolumeMounts: []corev1.VolumeMount{{Name: "results", MountPath: ResultsDir}}},
			},
			Volumes: volumes,
		},
	}
}
