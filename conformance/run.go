package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// Run runs each phase of the run (Mode.Phases) in turn, then writes their
// results as one in Sonobuoy's layout.
func (r Runner) Run(ctx context.Context, keep bool) (Outcome, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	phases := r.Spec.Mode.Phases()
	var raws []string
	for i, ph := range phases {
		if len(phases) > 1 {
			r.logf("phase %d of %d: %s", i+1, len(phases), ph.Name)
		}
		pr := r
		pr.Spec.Mode = ph.Mode
		raw, err := pr.runPhase(ctx, ph.Name, keep, start)
		if err != nil {
			if len(phases) > 1 {
				err = fmt.Errorf("%s phase: %w", ph.Name, err)
			}
			return Outcome{}, err
		}
		raws = append(raws, raw)
	}
	out, err := r.writeResults(ctx, raws, phases, start)
	out.Elapsed = time.Since(start)
	return out, err
}

// runPhase creates one conformance pod and its objects, follows its
// progress and copies its results out (go-runner's tarball). The objects
// are deleted at the end, whatever happened, unless keep is set.
func (r Runner) runPhase(ctx context.Context, name string, keep bool, start time.Time) (string, error) {
	r.logf("mode %s: focus %q, skip %q, label filter %q, image %s", r.Spec.Mode.Name, r.Spec.Mode.Focus, r.Spec.Mode.Skip, r.Spec.Mode.LabelFilter, r.Spec.Image)
	if err := r.deleteObjects(ctx); err != nil {
		return "", err
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
		return "", err
	}
	if err := r.waitRunning(ctx); err != nil {
		return "", err
	}
	remote, err := r.follow(ctx, start)
	if err != nil {
		return "", err
	}
	return r.copyOut(ctx, remote, "e2e-raw-"+name+".tar.gz")
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

// follow polls the worker's log (progress updates, then the results
// tarball's path) and the e2e container's log (ginkgo prints one bullet per
// passed spec: e2e.test's progress updates count failures, not passes),
// prints progress, and returns the tarball's path inside the pod once
// go-runner is done. Polling, not following: a followed log stream was seen
// to stall here while the container kept writing.
func (r Runner) follow(ctx context.Context, start time.Time) (string, error) {
	var st progressState
	go r.countSpecNamespaces(ctx, &st.namespaces)
	for {
		worker, err := r.containerLog(ctx, workerName)
		if err == nil {
			if done := st.readWorker(worker, r); done != "" {
				r.logf("e2e finished after %s; results at %s in the pod", time.Since(start).Round(time.Second), done)
				return done, nil
			}
		}
		if e2e, err := r.containerLog(ctx, e2eContainer); err == nil {
			st.readE2E(e2e, r)
		}
		st.report(r, start)
		if err := r.podStopped(ctx); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return "", fmt.Errorf("the run did not finish within --timeout %s", r.Timeout)
			}
			return "", fmt.Errorf("stopped before the run finished: %w", ctx.Err())
		case <-time.After(10 * time.Second):
		}
	}
}

func (r Runner) containerLog(ctx context.Context, container string) (string, error) {
	data, err := r.Client.CoreV1().Pods(Namespace).GetLogs(PodName, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	return string(data), err
}

// progressState is what the runner has learnt of a run so far.
type progressState struct {
	seen, passed, failed, total int
	bullets                     int          // ginkgo's result bullets in e2e.log, as the worker counted them
	namespaces                  atomic.Int64 // spec namespaces the e2e framework created
	printed                     string
	lastPrint                   time.Time
}

// readWorker takes the worker log lines not read yet (e2e.test's progress
// updates: the spec total) and returns the results path once the worker
// names it.
func (st *progressState) readWorker(log string, r Runner) string {
	lines := strings.Split(log, "\n")
	for ; st.seen < len(lines)-1; st.seen++ { // the last element is an unfinished line
		if n, ok := parseBulletsLine(lines[st.seen]); ok {
			st.bullets = n
			continue
		}
		p, done := parseWorkerLine(lines[st.seen])
		if done != "" {
			return done
		}
		if p != nil && p.Total > 0 {
			st.total = p.Total
		}
	}
	return ""
}

// readE2E counts ginkgo's bullets in the e2e container's log and prints
// each failed spec once, as its report appears. A passed spec is a bare
// bullet that reaches the container log only when ginkgo ends the line (at
// the end of a run without failures), so the worker's count from e2e.log
// is used when it is ahead; a failure's report is whole lines, so failures
// show as they happen even when e2e.test's own progress updates stop after
// the first (seen here).
func (st *progressState) readE2E(log string, r Runner) {
	failures := failedSpecs(log)
	for _, name := range failures[min(st.failed, len(failures)):] {
		r.logf("FAILED %s", name)
	}
	st.failed = max(st.failed, len(failures))
	st.passed = max(strings.Count(log, "•"), st.bullets) - len(failures)
}

// failedSpecs are the names ginkgo prints under each "• [FAILED]" line.
func failedSpecs(log string) []string {
	var names []string
	lines := strings.Split(log, "\n")
	for i := 0; i < len(lines)-1; i++ {
		if strings.HasPrefix(lines[i], "• [FAILED]") || strings.HasPrefix(lines[i], "• [PANICKED]") || strings.HasPrefix(lines[i], "• [TIMEDOUT]") {
			names = append(names, strings.TrimSpace(lines[i+1]))
		}
	}
	return names
}

// countSpecNamespaces counts the namespaces the e2e framework creates (one
// or more per spec, labelled e2e-run): progress that does not wait for
// ginkgo to end a line of bullets.
func (r Runner) countSpecNamespaces(ctx context.Context, n *atomic.Int64) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		w, err := r.Client.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{LabelSelector: "e2e-run"})
		if err != nil {
			time.Sleep(10 * time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if ns, ok := ev.Object.(*corev1.Namespace); ok && !seen[ns.Name] {
				seen[ns.Name] = true
				n.Add(1)
			}
		}
	}
}

func (st *progressState) report(r Runner, start time.Time) {
	line := fmt.Sprintf("%d spec namespaces created, %d passed, %d failed of %d specs", st.namespaces.Load(), st.passed, st.failed, st.total)
	if line == st.printed || time.Since(st.lastPrint) < 30*time.Second {
		return
	}
	r.logf("[%s] %s", time.Since(start).Round(time.Second), line)
	st.printed, st.lastPrint = line, time.Now()
}

// podStopped fails when the pod was rejected, when the worker stopped, or when the e2e container
// stopped a while ago and no results were announced (go-runner writes its
// done file on the way out, so that means it crashed or was killed).
func (r Runner) podStopped(ctx context.Context) error {
	pod, err := r.Client.CoreV1().Pods(Namespace).Get(ctx, PodName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	if pod.Status.Phase == corev1.PodFailed && len(pod.Status.ContainerStatuses) == 0 {
		// Rejected or evicted before any container ran (a node under
		// disk pressure, for one): nothing will ever start.
		return fmt.Errorf("the pod failed on node %s before its containers ran: %s: %s", pod.Spec.NodeName, pod.Status.Reason, strings.TrimSpace(pod.Status.Message))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		t := cs.State.Terminated
		switch {
		case t == nil:
		case cs.Name == workerName:
			return fmt.Errorf("the worker container stopped (%s, exit %d) before the results were ready", t.Reason, t.ExitCode)
		case cs.Name == e2eContainer && time.Since(t.FinishedAt.Time) > time.Minute:
			return fmt.Errorf("the e2e container stopped (%s, exit %d) without results: see `kubectl -n %s logs %s -c %s` (run with --keep to look)", t.Reason, t.ExitCode, Namespace, PodName, e2eContainer)
		}
	}
	return nil
}

// copyOut streams the results tarball out of the pod (busybox cat in the
// worker container) into Out, as name.
func (r Runner) copyOut(ctx context.Context, remote, name string) (string, error) {
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return "", err
	}
	local := filepath.Join(r.Out, name)
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
