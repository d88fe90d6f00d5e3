package server

import (
	"context"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/serverbundle"
)

// tokenFollowInterval is how often a server of several checks the tokens
// it keeps against the cluster's: one list of bootstrap tokens and one
// GET of a ConfigMap per server per minute.
const tokenFollowInterval = time.Minute

// followTokens keeps DATA-DIR/token and DATA-DIR/server-token true after
// k1m token rotate on another server: the new join token is written, and
// a seal the cluster no longer uses is forgotten (it opens no bundle the
// cluster stores, and a stale file would send an operator joining a
// server to a dead token).
func (s *Server) followTokens(ctx context.Context, client kubernetes.Interface, token serverToken) {
	var lastErr string // said once until it changes: a server out of reach fails every round
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(tokenFollowInterval):
		}
		next, err := s.followTokensOnce(ctx, client, token)
		if err != nil {
			if err.Error() != lastErr {
				s.warn("checking the cluster's tokens (tried again every %s): %v", tokenFollowInterval, err)
				lastErr = err.Error()
			}
			continue
		}
		lastErr = ""
		token = next
	}
}

func (s *Server) followTokensOnce(ctx context.Context, client kubernetes.Interface, token serverToken) (serverToken, error) {
	next := token
	secret, found, err := join.CurrentServerToken(ctx, client)
	if err != nil {
		return token, err
	}
	if found && secret != token.Secret {
		next.Token = pki.Token{CAHash: token.CAHash, Secret: secret}
	}
	if next.seal != "" {
		underID, any, err := join.BundlePublished(ctx, client, serverbundle.SealID(next.seal))
		if err != nil {
			return token, err
		}
		if any && !underID {
			adopted, err := s.adoptRotatedSeal(ctx, client, next.seal)
			if err != nil {
				return token, err
			}
			next.seal = adopted
			if adopted == "" {
				if err := fsutil.RemoveIfExists(ServerTokenFile(s.cfg.DataDir)); err != nil {
					return token, err
				}
				s.step("%v: %s removed; join servers with DATA-DIR/server-token of the server it was rotated on", join.ErrSealRotated, ServerTokenFile(s.cfg.DataDir))
			}
		}
	}
	if next.Token == token.Token && next.seal == token.seal {
		return token, nil
	}
	if err := s.writeTokenFiles(next); err != nil {
		return token, err
	}
	if next.Token != token.Token {
		s.step("the cluster's join token is %s now (rotated on another server): %s rewritten", next.TokenID(), TokenFile(s.cfg.DataDir))
	}
	return next, nil
}

// adoptRotatedSeal returns the seal DATA-DIR/server-token holds when it is
// not old (the one this server ran with) and the cluster's bundle is
// published under it: k1m token rotate run on this server's own data
// directory wrote it there. Otherwise it returns "" (the rotation was on
// another server, and the file opens no bundle the cluster stores).
func (s *Server) adoptRotatedSeal(ctx context.Context, client kubernetes.Interface, old string) (string, error) {
	data, err := os.ReadFile(ServerTokenFile(s.cfg.DataDir))
	if err != nil {
		return "", nil
	}
	kept, err := pki.ParseToken(string(data))
	if err != nil || !kept.IsServerToken() || kept.Seal == old {
		return "", nil
	}
	underID, _, err := join.BundlePublished(ctx, client, serverbundle.SealID(kept.Seal))
	if err != nil || !underID {
		return "", err
	}
	return kept.Seal, nil
}
