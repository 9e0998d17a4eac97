package procenv

import (
	"slices"
	"strings"
	"testing"
)

func TestInherit(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin:/bin", "HOME=/var/lib/unyo", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8", "TZ=UTC",
		"UNYO_AGENT_TOKEN=secret", "unyo_agent_token=secret2", "AWS_SECRET_ACCESS_KEY=aws", "HTTPS_PROXY=http://proxy:3128",
		"ORACLE_HOME=/opt/oracle", "NOEQUALS",
	}
	tests := []struct {
		name string
		pass []string
		want []string
	}{
		{"base only", nil, []string{"PATH=/usr/bin:/bin", "HOME=/var/lib/unyo", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8", "TZ=UTC"}},
		{"declared", []string{"HTTPS_PROXY", "ORACLE_HOME", "MISSING"}, []string{
			"PATH=/usr/bin:/bin", "HOME=/var/lib/unyo", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8", "TZ=UTC",
			"HTTPS_PROXY=http://proxy:3128", "ORACLE_HOME=/opt/oracle",
		}},
		{"UNYO_ never, even declared", []string{"UNYO_AGENT_TOKEN", "unyo_agent_token"}, []string{"PATH=/usr/bin:/bin", "HOME=/var/lib/unyo", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8", "TZ=UTC"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Inherit(environ, tt.pass); !slices.Equal(got, tt.want) {
				t.Errorf("Inherit(%q) =\n%q\nwant\n%q", tt.pass, got, tt.want)
			}
		})
	}
}

func TestWithoutUnyo(t *testing.T) {
	got := WithoutUnyo([]string{"PATH=/bin", "UNYO_PLUGIN_MAGIC_COOKIE=x", "PLUGIN_PROTOCOL_VERSIONS=1", "UNYO_AGENT_TOKEN=t", "FOO=bar"})
	if want := []string{"PATH=/bin", "FOO=bar"}; !slices.Equal(got, want) {
		t.Errorf("WithoutUnyo = %q, want %q", got, want)
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name, wantErr string
	}{
		{"HTTPS_PROXY", ""},
		{"", "empty"},
		{"A=B", "must not contain"},
		{"UNYO_AGENT_TOKEN", "never passed"},
		{"Unyo_Anything", "never passed"},
	}
	for _, tt := range tests {
		err := CheckName(tt.name)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckName(%q) = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckName(%q) = %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}
