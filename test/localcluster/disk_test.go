package localcluster

import "testing"

func TestDiskRoomRefusesWhatKubeletsWouldEvict(t *testing.T) {
	const total = 100 << 30
	if err := diskRoom("/d", 8<<30, total); err != nil {
		t.Errorf("8%% available: %v, want room", err)
	}
	err := diskRoom("/d", 6<<30, total)
	want := "the file system holding /d has 6.0% available (6.0 GiB of 100.0 GiB): kubelets refuse pods below 5% available (DiskPressure); free at least 1.0 GiB first (old cluster data, go clean -cache)"
	if err == nil || err.Error() != want {
		t.Errorf("6%% available: %v\nwant %s", err, want)
	}
	if err := diskRoom("/d", 0, 0); err == nil {
		t.Error("an empty file system: no error")
	}
}

func TestExistingAncestor(t *testing.T) {
	dir := t.TempDir()
	if got := existingAncestor(dir + "/a/b"); got != dir {
		t.Errorf("existingAncestor = %s, want %s", got, dir)
	}
}
