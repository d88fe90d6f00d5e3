//go:build !k1m_stock

package multicall

import "context"

func start(ctx context.Context, name string, args []string, done chan error) <-chan error {
	return inProcess(ctx, name, args, done)
}
