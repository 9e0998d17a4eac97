package nagios_test

import (
	"fmt"

	"github.com/unyo-ops/unyo/checks/nagios"
)

func ExampleParse() {
	out := nagios.Parse("DISK WARNING - free space: / 3326 MB (6%); | /=2643MB;2500;3000;0;3400\n")
	fmt.Println(nagios.StatusFromExit(1), out.Text)
	for _, p := range out.Perfdata {
		bytes, unit := p.BaseValue()
		fmt.Printf("%s = %v %s (%.0f %s), warning: %v, critical: %v\n",
			p.Label, p.Value, p.UOM, bytes, unit, p.Warn.Alerts(p.Value), p.Crit.Alerts(p.Value))
	}
	// Output:
	// WARNING DISK WARNING - free space: / 3326 MB (6%);
	// / = 2643 MB (2771386368 bytes), warning: true, critical: false
}

func ExampleParseRange() {
	r, err := nagios.ParseRange("@10:20")
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Alerts(9), r.Alerts(10), r.Alerts(20), r.Alerts(21))

	_, err = nagios.ParseRange("0,5")
	fmt.Println(err)
	// Output:
	// false true true false
	// invalid range "0,5": "0,5" uses ',' as the decimal separator (a locale setting of the plugin?); the guidelines require '.'
}
