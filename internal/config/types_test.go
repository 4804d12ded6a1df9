package config

import "testing"

func TestRouteAction(t *testing.T) {
	tests := []struct {
		name  string
		route Route
		want  Action
		str   string
	}{
		{name: "upstream", route: Route{Upstream: "app"}, want: ActionUpstream, str: "upstream"},
		{name: "respond", route: Route{Respond: &Respond{}}, want: ActionRespond, str: "respond"},
		{name: "static", route: Route{Static: &Static{}}, want: ActionStatic, str: "static"},
		{name: "redirect", route: Route{Redirect: &Redirect{}}, want: ActionRedirect, str: "redirect"},
		{name: "none", route: Route{}, want: ActionNone, str: "none"},
		{name: "several: first wins", route: Route{Respond: &Respond{}, Static: &Static{}}, want: ActionRespond, str: "respond"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.route.Action()
			if got != tt.want || got.String() != tt.str {
				t.Errorf("got %v (%d), want %v (%d)", got, got, tt.str, tt.want)
			}
		})
	}
}

func TestAdminEnabled(t *testing.T) {
	tests := []struct {
		address string
		want    bool
	}{
		{address: "127.0.0.1:9901", want: true},
		{address: "", want: true},
		{address: "off", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			if got := (Admin{Address: tt.address}).Enabled(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{name: "all", p: Problem{File: "h.yaml", Line: 3, Path: "a.b", Msg: "bad (good)"}, want: "h.yaml:3: a.b: bad (good)"},
		{name: "no path", p: Problem{File: "h.yaml", Line: 3, Msg: "bad"}, want: "h.yaml:3: bad"},
		{name: "no line", p: Problem{File: "h.yaml", Path: "a", Msg: "bad"}, want: "h.yaml: a: bad"},
		{name: "no file", p: Problem{Line: 3, Path: "a", Msg: "bad"}, want: "line 3: a: bad"},
		{name: "path only", p: Problem{Path: "a", Msg: "bad"}, want: "a: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	tests := []struct {
		parent, key, path, back string
	}{
		{parent: "", key: "listeners", path: "listeners", back: ""},
		{parent: "routes[0]", key: "match", path: "routes[0].match", back: "routes[0]"},
		{parent: "routes[0].respond.headers", key: "X-A_b", path: "routes[0].respond.headers.X-A_b", back: "routes[0].respond.headers"},
		{parent: "routes[0].respond.headers", key: "X Bad.x", path: `routes[0].respond.headers["X Bad.x"]`, back: "routes[0].respond.headers"},
		{parent: "", key: "a b", path: `["a b"]`, back: ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p := childPath(tt.parent, tt.key)
			back, ok := parentPath(p)
			if p != tt.path || back != tt.back || !ok {
				t.Errorf("got %q with parent %q, %v, want %q with parent %q, true", p, back, ok, tt.path, tt.back)
			}
		})
	}
	if got, ok := parentPath("upstreams[1]"); got != "upstreams" || !ok {
		t.Errorf("parentPath(upstreams[1]): got %q, %v, want %q, true", got, ok, "upstreams")
	}
	if _, ok := parentPath(""); ok {
		t.Errorf("parentPath(\"\"): got true, want false")
	}
}
