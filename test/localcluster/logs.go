package localcluster

import (
	"os"
	"strings"
)

// ServersLogging are the servers (numbered from 1) whose log holds text.
func (c *Cluster) ServersLogging(text string) ([]int, error) {
	var found []int
	for i := 1; i <= len(c.plan.Servers); i++ {
		data, err := os.ReadFile(c.Server(i).LogFile)
		if err != nil {
			return nil, err
		}
		if strings.Contains(string(data), text) {
			found = append(found, i)
		}
	}
	return found, nil
}
