//go:build k1m_stock

package server

// runtimeTuning: the unpatched build has no runtime tuning (patch 0002):
// its Go runtime keeps its defaults, as upstream's.
func runtimeTuning() error { return nil }
