package integration

import "k1m.dev/k1m/pkg/testutil"

func init() { testutil.QuietGRPC() }
