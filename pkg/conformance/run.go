package conformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// Runner runs one conformance run against a cluster.
type Runner struct {
	Config *rest.Config
	Client kubernetes.Interface
	Spec   RunSpec
	// Out is the folder the results tarball and summary go to.
	Out string
	Log io.Writer
	// Timeout bounds the whole run.
	Timeout time.Duration
}

// Outcome is what a finished run produced.
type Outcome struct {
	Tarball string
	Results Results
	Elapsed time.Duration
}

// Run creates the run's objects, follows its progress, copies the results
// out and writes them in Sonobuoy's layout. The objects are deleted at the
// end, whatever happened, unless keep is set.
func (r Runner) Run(ctx context.Context, keep bool) (Outcome, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	r.logf("mode %s: focus %q, skip %q, image %s", r.Spec.Mode.Name, r.Spec.Mode.Focus, r.Spec.Mode.Skip, r.Spec.Image)
	if err := r.deleteObjects(ctx); err != nil {
		return Outcome{}, err
	}
	if !keep {
		defer func() {
			cleanCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := r.deleteObjects(cleanCtx); err != nil {
				r.logf("cleaning up: %v", err)
			}
		}()
	}
	if err := r.createObjects(ctx); err != nil {
		return Outcome{}, err
	}
	if err := r.waitRunning(ctx); err != nil {
		return Outcome{}, err
	}
	remote, err := r.follow(ctx, start)
	if err != nil {
		return Outcome{}, err
	}
	raw, err := r.copyOut(ctx, remote)
	if err != nil {
		return Outcome{}, err
	}
	out, err := r.writeResults(ctx, raw, start)
	out.Elapsed = time.Since(start)
	return out, err
}

func (r Runner) logf(format string, args ...any) {
	fmt.Fprintf(r.Log, "conformance: "+format+"\n", args...)
}

func (r Runner) createObjects(ctx context.Context) error {
	ns, sa, crb, cm, pod := r.Spec.objects()
	c := r.Client
	steps := []struct {
		what   string
		create func() error
	}{
		{"namespace " + ns.Name, func() error { _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); return err }},
		{"service account " + sa.Name, func() error {
			_, err := c.CoreV1().ServiceAccounts(Namespace).Create(ctx, sa, metav1.CreateOptions{})
			return err
		}},
		{"cluster role binding " + crb.Name, func() error {
			_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
			return err
		}},
		{"config map " + cm.Name, func() error {
			_, err := c.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}},
		{"pod " + pod.Name, func() error {
			_, err := c.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := s.create(); err != nil {
			return fmt.Errorf("creating %s: %w", s.what, err)
		}
		r.logf("created %s", s.what)
	}
	return nil
}

// deleteObjects removes a run's objects and waits for the namespace to go.
func (r Runner) deleteObjects(ctx context.Context) error {
	err := r.Client.RbacV1().ClusterRoleBindings().Delete(ctx, ServiceAccount, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting cluster role binding %s: %w", ServiceAccount, err)
	}
	err = r.Client.CoreV1().Namespaces().Delete(ctx, Namespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", Namespace, err)
	}
	r.logf("deleting namespace %s", Namespace)
	return wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := r.Client.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitRunning waits for the pod's containers to start, and says why when
// they cannot (most often: the images were not imported into the nodes).
func (r Runner) waitRunning(ctx context.Context) error {
	r.logf("waiting for pod %s/%s to start", Namespace, PodName)
	deadline, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(deadline, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := r.Client.CoreV1().Pods(Namespace).Get(ctx, PodName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			r.logf("pod %s on node %s: %s", PodName, pod.Spec.NodeName, pod.Status.Phase)
			return true, nil
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "ErrImageNeverPull") {
				return false, fmt.Errorf("container %s cannot get image %s (%s: %s): import the conformance images into every node first (make conformance does; see docs/conformance.md)", cs.Name, cs.Image, w.Reason, w.Message)
			}
			if w := cs.State.Waiting; w != nil && w.Reason != last {
				last = w.Reason
				r.logf("container %s: %s", cs.Name, w.Reason)
			}
		}
		return false, nil
	})
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pod %s/%s did not start within 5 minutes (last: %s)", Namespace, PodName, last)
	}
	return err
}

// follow reads the worker's log, prints progress as it comes, and returns
// the results tarball's path inside the pod once go-runner is done.
func (r Runner) follow(ctx context.Context, start time.Time) (string, error) {
	for {
		stream, err := r.Client.CoreV1().Pods(Namespace).GetLogs(PodName, &corev1.PodLogOptions{Container: workerName, Follow: true}).Stream(ctx)
		if err != nil {
			return "", fmt.Errorf("following the worker's log: %w", err)
		}
		path, err := r.readProgress(stream, start)
		stream.Close()
		if path != "" || err != nil {
			return path, err
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("the run did not finish in time (%s): %w", r.Timeout, ctx.Err())
		}
		if err := r.e2eExited(ctx); err != nil {
			return "", err
		}
		time.Sleep(2 * time.Second) // the log stream ended early; reopen it
	}
}

func (r Runner) readProgress(stream io.Reader, start time.Time) (string, error) {
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	lastPrint := time.Time{}
	for sc.Scan() {
		p, done := parseWorkerLine(sc.Text())
		if done != "" {
			r.logf("e2e finished after %s; results at %s in the pod", time.Since(start).Round(time.Second), done)
			return done, nil
		}
		if p == nil {
			continue
		}
		failedNow := strings.HasPrefix(p.Msg, "FAILED")
		if failedNow || time.Since(lastPrint) > 10*time.Second || p.Msg == "Test Suite completed" {
			r.logf("[%s] %d passed, %d failed of %d: %s", time.Since(start).Round(time.Second), p.Completed, p.Failed, p.Total, p.Msg)
			lastPrint = time.Now()
		}
	}
	return "", nil
}

// e2eExited fails when the e2e container stopped without a done file.
func (r Runner) e2eExited(ctx context.Context) error {
	pod, err := r.Client.CoreV1().Pods(Namespace).Get(ctx, PodName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == workerName && cs.State.Terminated != nil {
			return fmt.Errorf("the worker container stopped (%s, exit %d) before the results were ready", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
	}
	return nil
}

// copyOut streams the results tarball out of the pod (busybox cat in the
// worker container) into Out.
func (r Runner) copyOut(ctx context.Context, remote string) (string, error) {
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return "", err
	}
	local := filepath.Join(r.Out, "e2e-raw.tar.gz")
	f, err := os.Create(local)
	if err != nil {
		return "", err
	}
	defer f.Close()
	req := r.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(Namespace).Name(PodName).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: workerName, Command: []string{"cat", remote}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(r.Config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var stderr strings.Builder
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: f, Stderr: &stderr}); err != nil {
		return "", fmt.Errorf("copying %s out of the pod: %w %s", remote, err, stderr.String())
	}
	return local, f.Close()
}
