package creates

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestValidateNamesEachFlag(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Count: 200, Parallel: []int{1, 20}}, "<nil>"},
		{Config{Count: 0, Parallel: []int{1, 0}}, "--count 0: want at least 1, e.g. 200\n--parallel 0: want at least 1 create in flight, e.g. 1,20"},
		{Config{Count: 1}, "--parallel is empty: want creates in flight, e.g. 1,20"},
	} {
		if got := fmt.Sprint(c.cfg.Validate()); got != c.want {
			t.Errorf("Validate(%+v) = %s, want %s", c.cfg, got, c.want)
		}
	}
}

// Every kind at every parallelism creates Count objects, then the
// namespace is deleted.
func TestRunCreatesEachKindAtEachParallelism(t *testing.T) {
	client := fake.NewSimpleClientset()
	var lines []string
	results, err := Run(context.Background(), Config{Count: 7, Parallel: []int{1, 3}}, client, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Kind            string
		Parallel, Count int
	}
	var got []row
	for _, r := range results {
		got = append(got, row{r.Kind, r.Parallel, r.Count})
	}
	want := []row{{"services", 1, 7}, {"configmaps", 1, 7}, {"services", 3, 7}, {"configmaps", 3, 7}}
	if !reflect.DeepEqual(got, want) || len(lines) != 4 {
		t.Errorf("results %+v (%d lines), want %+v (4 lines)", got, len(lines), want)
	}
	services, err := client.CoreV1().Services(Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(services.Items) != 14 {
		t.Errorf("%d Services (%v), want 14", len(services.Items), err)
	}
	if _, err := client.CoreV1().Namespaces().Get(context.Background(), Namespace, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s still there", Namespace)
	}
}
