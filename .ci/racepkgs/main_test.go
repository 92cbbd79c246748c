package main

import (
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: "x/hub", TestGoFiles: []string{"hub_test.go"}},
		{ImportPath: "x/cmd"},
		{ImportPath: "x/ui", XTestGoFiles: []string{"ui_test.go"}},
		{ImportPath: "x/gw", TestGoFiles: []string{"gw_test.go"}},
	}
	race, report, err := choose(pkgs, map[string]string{"x/ui": "drives a browser"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(race, " ") != "x/gw x/hub" {
		t.Errorf("race = %q, want x/gw x/hub (sorted, with tests, not excluded)", race)
	}
	if !strings.Contains(report, "left out x/ui: drives a browser") || !strings.Contains(report, "1 packages have no tests") {
		t.Errorf("report:\n%s", report)
	}
	if _, _, err := choose(pkgs, map[string]string{"x/cmd": "no tests"}); err == nil {
		t.Error("an exclusion of a package without tests was accepted; want an error (it is stale)")
	}
}

func TestParseExclusions(t *testing.T) {
	m, err := parseExclusions("# comment\n\nx/ui # drives a browser\n")
	if err != nil || len(m) != 1 || m["x/ui"] != "drives a browser" {
		t.Fatalf("parseExclusions = %v, %v", m, err)
	}
	if _, err := parseExclusions("x/ui\n"); err == nil || !strings.Contains(err.Error(), "without a reason") {
		t.Fatalf("an exclusion without a reason: err = %v", err)
	}
}
