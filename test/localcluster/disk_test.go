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

func TestImportRoomCountsEveryNodesCopy(t *testing.T) {
	const total = 100 << 30
	if err := importRoom("/i", 1<<30, 5, "/d", 20<<30, total); err != nil {
		t.Errorf("1 GiB into 5 nodes with 20 GiB available: %v, want room", err)
	}
	err := importRoom("/i", 1<<30, 5, "/d", 15<<30, total)
	want := "importing /i (1.0 GiB) into 5 nodes takes about 10.0 GiB, after which the file system holding /d has 5.0% available (5.0 GiB of 100.0 GiB): kubelets refuse pods below 5% available (DiskPressure); free at least 2.0 GiB first (old cluster data, go clean -cache)"
	if err == nil || err.Error() != want {
		t.Errorf("1 GiB into 5 nodes with 15 GiB available: %v\nwant %s", err, want)
	}
}
