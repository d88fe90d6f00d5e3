package config

import (
	"strings"
	"testing"
)

func TestAgentPodLogsDirMustBeAbsolute(t *testing.T) {
	a := DefaultAgent()
	a.Server, a.NodeIP = "https://[fddf:4035:b520::1]:6443", "fddf:4035:b520::11"
	a.PodLogsDir = "pod-logs"
	err := a.Validate()
	if err == nil || !strings.Contains(err.Error(), "--pod-logs-dir") || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative --pod-logs-dir: %v", err)
	}
}
