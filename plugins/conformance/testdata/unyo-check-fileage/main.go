// Command unyo-check-fileage checks that a file exists and is younger than
// its thresholds: the authoring example of plugins/README.md.
package main

import (
	"context"
	"os"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

type target struct {
	Path     string       `json:"path" required:"true" doc:"the file to check"`
	Warning  sdk.Duration `json:"warning" default:"5m" doc:"age from which the check warns"`
	Critical sdk.Duration `json:"critical" default:"15m" doc:"age from which it is critical"`
}

func fileAge(_ context.Context, _ struct{}, t target) (sdk.CheckResult, error) {
	st, err := os.Stat(t.Path)
	if err != nil {
		return sdk.Result(sdk.Critical, "%v", err), nil
	}
	age := time.Since(st.ModTime())
	warn, crit := time.Duration(t.Warning).Seconds(), time.Duration(t.Critical).Seconds()
	r := sdk.Result(sdk.Above(age.Seconds(), warn, crit), "%s is %s old", t.Path, age.Round(time.Second))
	return r.With(sdk.Perf("age", age.Seconds(), "s").Thresholds(warn, crit).AtLeast(0)), nil
}

func main() {
	sdk.Serve(&sdk.Check[struct{}, target]{Name: "fileage", Version: "0.1.0", Run: fileAge})
}
