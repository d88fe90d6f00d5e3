package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MinMemoryLimit is the least --memory-limit: two etcds, kube-apiserver,
// the controllers and a kubelet do not start in less.
const MinMemoryLimit = 1 << 30

// ParseMemoryLimit reads --memory-limit: empty is 0 (the sizing rule).
func ParseMemoryLimit(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Value() < MinMemoryLimit {
		return 0, fmt.Errorf("--memory-limit %q: want a size of at least 1Gi, such as 6Gi or 6442450944, or leave it unset for the sizing rule", v)
	}
	return q.Value(), nil
}
