package cluster

import "testing"

func TestSeriesNode(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"node": "web1"}, "web1"},
		{map[string]string{"node": "web1", "cpu": "0", "mode": "idle"}, "web1{cpu=0,mode=idle}"},
		{map[string]string{"job": "api", "env": "prod"}, "env=prod,job=api"},
		// The instance and job the cluster gives agents' series are left out.
		{map[string]string{"node": "web1", "instance": "web1", "job": "node", "cpu": "0"}, "web1{cpu=0}"},
		// A check's own are not.
		{map[string]string{"node": "web1", "instance": "db:9187", "job": "postgres"}, "web1{instance=db:9187,job=postgres}"},
		{map[string]string{"node": "web1", "instance": "web1", "job": "postgres"}, "web1{job=postgres}"},
		{nil, "c1"},
	} {
		if got := seriesNode(tc.labels, "c1"); got != tc.want {
			t.Errorf("seriesNode(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}
