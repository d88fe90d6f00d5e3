package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"k1m.dev/k1m/test/localcluster"
)

// The fault injectors. Each records what it did in the fixture before
// doing it (a server is out from the moment it is told to go), and each
// heal after it is done.

// Kill kills server i with SIGKILL.
func (f *Fixture) Kill(i int) error {
	f.markOut(i)
	f.logf("kill -9 server %d", i)
	return f.H.KillServer(i)
}

// Stop stops server i with SIGTERM, as an operator or systemd would.
func (f *Fixture) Stop(ctx context.Context, i int) error {
	f.markOut(i)
	f.logf("SIGTERM server %d", i)
	return f.H.StopServer(ctx, i)
}

// StopAll stops every server at once.
func (f *Fixture) StopAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, Servers)
	for i := 1; i <= Servers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i-1] = f.Stop(ctx, i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Start starts server i and returns once its API server is ready.
func (f *Fixture) Start(ctx context.Context, i int) error {
	f.logf("start server %d", i)
	if err := f.H.StartServer(ctx, i); err != nil {
		return err
	}
	f.markBack(i)
	return nil
}

// StartInOrder launches the servers in order without waiting for each
// (one alone has no quorum), then waits for all of them.
func (f *Fixture) StartInOrder(ctx context.Context, order ...int) error {
	for _, i := range order {
		f.logf("start server %d (not waiting)", i)
		if err := f.H.LaunchServer(i); err != nil {
			return err
		}
	}
	for _, i := range order {
		if err := f.H.WaitServer(ctx, i); err != nil {
			return err
		}
		f.markBack(i)
	}
	return nil
}

// CutServer drops every packet between server i and the other servers
// (their etcd peers and everything else); agents still reach it.
func (f *Fixture) CutServer(i int) error {
	f.markOut(i)
	f.logf("cut server %d off from the other servers", i)
	return localcluster.Cut(f.H.Server(i), f.serverAddrs(i)...)
}

// HealServer undoes CutServer.
func (f *Fixture) HealServer(i int) error {
	f.logf("heal server %d", i)
	if err := localcluster.Heal(f.H.Server(i), f.serverAddrs(i)...); err != nil {
		return err
	}
	f.markBack(i)
	return nil
}

// CutAgent drops every packet between agent a and server s. Nothing is
// excused: the agent's load balancer must fail over to another server.
func (f *Fixture) CutAgent(a, s int) error {
	f.logf("cut agent %d off from server %d", a, s)
	return localcluster.Cut(f.H.Agent(a), f.H.Server(s).Addr)
}

// HealAgent undoes CutAgent.
func (f *Fixture) HealAgent(a, s int) error {
	f.logf("heal agent %d and server %d", a, s)
	return localcluster.Heal(f.H.Agent(a), f.H.Server(s).Addr)
}

// fillerName is the file FillDisk writes into the etcd directory.
const fillerName = "faults-filler"

// FillDisk fills the file system of server i's durable etcd (its own
// tmpfs: Options.EtcdDisk) until leave bytes are free.
func (f *Fixture) FillDisk(i int, leave int64) error {
	dir := etcdDir(f.H.Server(i))
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	if free <= leave {
		return fmt.Errorf("%s has %d MiB free, no more than the %d MiB to leave", dir, free>>20, leave>>20)
	}
	file, err := os.Create(filepath.Join(dir, fillerName))
	if err != nil {
		return err
	}
	defer file.Close()
	f.logf("fill %s: %d MiB of %d MiB free taken", dir, (free-leave)>>20, free>>20)
	return unix.Fallocate(int(file.Fd()), 0, 0, free-leave)
}

// FreeDisk removes FillDisk's file.
func (f *Fixture) FreeDisk(i int) error {
	f.logf("free the etcd disk of server %d", i)
	return os.Remove(filepath.Join(etcdDir(f.H.Server(i)), fillerName))
}
