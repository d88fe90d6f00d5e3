package bench

import (
	"reflect"
	"testing"

	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/deployed"
)

// --cluster-route-events replaces the two builds by the k1m build at each
// budget; the servers' count reaches every variant.
func TestClusterVariantsAtEachRouteEventBudget(t *testing.T) {
	o := Options{Deployed: deployed.Options{K1M: "/k1m", StockK1M: "/stock"},
		Cluster: clusterload.Config{RouteEvents: []int{2500, 100000}, Servers: 3}}
	want := []serverVariant{
		{Name: "k1m-route-events-2500", K1M: "/k1m", Args: []string{"--pod-route-events-per-second=2500"}, Servers: 3},
		{Name: "k1m-route-events-100000", K1M: "/k1m", Args: []string{"--pod-route-events-per-second=100000"}, Servers: 3},
	}
	if got := clusterVariants(o); !reflect.DeepEqual(got, want) {
		t.Errorf("clusterVariants =\n%+v\nwant\n%+v", got, want)
	}
}
