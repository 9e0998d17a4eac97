package web_test

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Item 9 and the tests' accessibility basics: every page has a language,
// a title, one h1 and no skipped heading level; every form control has a
// label; every image (SVG drawn for the page) has a text alternative.
func TestEveryPageHasAccessibilityBasics(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	_, login := b.get("/login")
	checkA11y(t, "/login", login)
	b.login(adminTok)
	for _, p := range pages {
		resp, body := b.get(p)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
			continue
		}
		checkA11y(t, p, body)
	}
}

func checkA11y(t *testing.T, page, body string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	labelled := map[string]bool{}
	var controls []*html.Node
	h1, last := 0, 0
	var walk func(n *html.Node, inLabel, inTemplate, inFigure bool)
	walk = func(n *html.Node, inLabel, inTemplate, inFigure bool) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "html":
				if attr(n, "lang") == "" {
					t.Errorf("%s: <html> has no lang", page)
				}
			case "label":
				if f := attr(n, "for"); f != "" {
					labelled[f] = true
				}
				inLabel = true
			case "template":
				inTemplate = true
			case "figure":
				inFigure = inFigure || hasChild(n, "figcaption")
			case "input", "select", "textarea":
				typ := attr(n, "type")
				if typ != "hidden" && typ != "submit" && !inLabel && attr(n, "aria-label") == "" {
					controls = append(controls, n)
				}
			case "h1", "h2", "h3", "h4":
				if inTemplate {
					break
				}
				lvl := int(n.Data[1] - '0')
				if lvl == 1 {
					h1++
				}
				if lvl > last+1 {
					t.Errorf("%s: <%s> follows <h%d>: a heading level is skipped", page, n.Data, last)
				}
				last = lvl
			case "svg":
				if !hasChild(n, "title") && attr(n, "aria-label") == "" && !inFigure {
					t.Errorf("%s: an <svg> has no <title> or aria-label", page)
				}
			case "button":
				if text(n) == "" && attr(n, "aria-label") == "" {
					t.Errorf("%s: a button has no name", page)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inLabel, inTemplate, inFigure)
		}
	}
	walk(doc, false, false, false)
	for _, c := range controls {
		if !labelled[attr(c, "id")] {
			t.Errorf("%s: <%s name=%q> has no label", page, c.Data, attr(c, "name"))
		}
	}
	if h1 != 1 {
		t.Errorf("%s: %d <h1>, want 1", page, h1)
	}
	if !strings.Contains(body, "<title>") {
		t.Errorf("%s: no <title>", page)
	}
}

func attr(n *html.Node, k string) string {
	for _, a := range n.Attr {
		if a.Key == k {
			return a.Val
		}
	}
	return ""
}

func hasChild(n *html.Node, tag string) bool {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == tag {
			return true
		}
	}
	return false
}

func text(n *html.Node) string {
	var b strings.Builder
	var f func(*html.Node)
	f = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			f(c)
		}
	}
	f(n)
	return strings.TrimSpace(b.String())
}

// Both themes: every text colour on its background meets WCAG AA
// (4.5:1), and the dark theme is the same whether chosen or preferred.
func TestThemesHaveEnoughContrast(t *testing.T) {
	css, err := os.ReadFile("static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile(`(?s)(:root|\[data-theme=dark\]|:root:not\(\[data-theme=light\]\)) \{(.*?)\}`).FindAllStringSubmatch(string(css), -1)
	themes := map[string]map[string]string{}
	for _, b := range blocks {
		vars := map[string]string{}
		for _, m := range regexp.MustCompile(`--([a-z-]+): (#[0-9a-f]{6})`).FindAllStringSubmatch(b[2], -1) {
			vars[m[1]] = m[2]
		}
		themes[b[1]] = vars
	}
	if len(themes) != 3 {
		t.Fatalf("found themes %v, want the light, the dark and the preferred dark", len(themes))
	}
	if fmt.Sprint(themes["[data-theme=dark]"]) != fmt.Sprint(themes[":root:not([data-theme=light])"]) {
		t.Error("the dark theme chosen and the dark theme preferred differ")
	}
	pairs := [][2]string{{"fg", "bg"}, {"muted", "bg"}, {"link", "bg"}, {"fg", "panel"}, {"muted", "panel"}, {"link", "panel"},
		{"flash-fg", "flash-bg"}, {"err-fg", "err-bg"},
		{"badge-fg", "fatal"}, {"badge-fg", "critical"}, {"badge-fg", "warning"}, {"badge-fg", "ok"}, {"badge-fg", "down"}, {"badge-fg", "grp"}}
	for name, vars := range themes {
		for _, p := range pairs {
			fg, bg := vars[p[0]], vars[p[1]]
			if fg == "" || bg == "" {
				t.Errorf("%s: --%s or --%s is missing", name, p[0], p[1])
				continue
			}
			if r := contrast(fg, bg); r < 4.5 {
				t.Errorf("%s: --%s %s on --%s %s has contrast %.2f, want at least 4.5", name, p[0], fg, p[1], bg, r)
			}
		}
	}
}

func luminance(hex string) float64 {
	var c [3]float64
	for i := range 3 {
		v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		s := float64(v) / 255
		if s <= 0.03928 {
			c[i] = s / 12.92
		} else {
			c[i] = math.Pow((s+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
}

func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}
