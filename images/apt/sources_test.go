package apt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// aptRoot makes a fake root with the given files under etc/apt.
func aptRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		writeFile(t, filepath.Join(root, "etc", "apt", name), []byte(content))
	}
	return root
}

const debianSourcesDeb822 = `# Modern Debian images ship this file.
Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`

func TestDebianMirror(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // "" means an error is expected
	}{
		{
			name:  "deb822 with security stanza",
			files: map[string]string{"sources.list.d/debian.sources": debianSourcesDeb822},
			want:  "http://mirror.example/debian",
		},
		{
			name: "one-line format with options and comments",
			files: map[string]string{"sources.list": `
# deb http://old.example/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://security.example/debian-security bookworm-security main
deb [ arch=amd64 signed-by=/usr/share/keyrings/nodesource.gpg ] https://nodesource.example/node_20.x nodistro main
deb-src http://src.example/debian bookworm main
deb [arch=amd64] http://mirror.example/debian/ bookworm main contrib # trailing comment
deb http://second.example/debian trixie main
`},
			want: "http://mirror.example/debian",
		},
		{
			name: "disabled stanza and non-Debian repository are skipped",
			files: map[string]string{
				"sources.list.d/a-nodesource.sources": "Types: deb\nURIs: https://nodesource.example/node_20.x\nSuites: nodistro\nComponents: main\nArchitectures: amd64\n",
				"sources.list.d/b-debian.sources": "Enabled: no\nTypes: deb\nURIs: http://disabled.example/debian\nSuites: trixie\nComponents: main\n\n" +
					"Types: deb-src deb\nURIs: http://mirror.example/debian http://other.example/debian\nSuites: trixie trixie-updates\nComponents: main\n",
			},
			want: "http://mirror.example/debian",
		},
		{
			name: "sources.list comes before sources.list.d, parts in name order",
			files: map[string]string{
				"sources.list":                  "deb http://first.example/debian sid main\n",
				"sources.list.d/0-debian.list":  "deb http://zero.example/debian sid main\n",
				"sources.list.d/debian.sources": debianSourcesDeb822,
			},
			want: "http://first.example/debian",
		},
		{
			name: "files with other suffixes or bad names are ignored",
			files: map[string]string{
				"sources.list.d/google-cloud-sdk.list.disabled-by-farm": "deb http://wrong.example/debian bookworm main\n",
				"sources.list.d/nodesource.sources.disabled-by-farm":    "Types: deb\nURIs: http://wrong.example/debian\nSuites: bookworm\n",
				"sources.list.d/backup~.list":                           "deb http://wrong.example/debian bookworm main\n",
				"sources.list.d/z.list":                                 "deb http://mirror.example/debian bookworm-backports main\n",
			},
			want: "http://mirror.example/debian",
		},
		{
			name: "only security and deb-src entries",
			files: map[string]string{
				"sources.list": "deb http://security.example/debian-security bookworm-security main\n" +
					"deb http://security.example/ buster/updates main\n" +
					"deb-src http://mirror.example/debian bookworm main\n",
			},
		},
		{
			name:  "Ubuntu is not Debian",
			files: map[string]string{"sources.list": "deb http://ubuntu.example/ubuntu jammy main\n"},
		},
		{name: "no sources at all", files: map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := debianMirror(aptRoot(t, tc.files))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				if !errors.Is(err, ErrNoMirror) {
					t.Errorf("error %q is not ErrNoMirror", err)
				}
				for _, s := range []string{"no Debian mirror configured", "KLAB_DEBIAN_MIRROR"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseAptSourcesDetails(t *testing.T) {
	es := parseDeb822Sources("x.sources", []byte(debianSourcesDeb822+"\nTypes: deb\nURIs: http://inline.example/debian\nSuites: sid\nSigned-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n abc\n -----END PGP PUBLIC KEY BLOCK-----\n"))
	if len(es) != 3 {
		t.Fatalf("got %d entries, want 3: %+v", len(es), es)
	}
	if es[0].SignedBy != "/usr/share/keyrings/debian-archive-keyring.gpg" {
		t.Errorf("SignedBy = %q", es[0].SignedBy)
	}
	if got := strings.Join(es[0].Suites, " "); got != "bookworm bookworm-updates" {
		t.Errorf("Suites = %q", got)
	}
	if es[2].SignedBy != "" {
		t.Errorf("inline key taken as keyring path: %q", es[2].SignedBy)
	}
	ls := parseOneLineSources("x.list", []byte("deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main contrib\n"))
	if len(ls) != 1 || ls[0].SignedBy != "/k.gpg" || strings.Join(ls[0].Components, ",") != "main,contrib" {
		t.Errorf("one-line entry = %+v", ls)
	}
	for s, want := range map[string]bool{
		"bookworm": true, "trixie-backports": true, "sid": true, "stable-updates": true,
		"bookworm-proposed-updates": true, "bookworm-backports-sloppy": true, "experimental": true,
		"bookworm-security": false, "buster/updates": false, "nodistro": false, "jammy": false,
	} {
		if got := isDebianSuite(s); got != want {
			t.Errorf("isDebianSuite(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestResolveMirror(t *testing.T) {
	t.Setenv(MirrorEnv, "http://env.example/debian/")
	if got, err := ResolveMirror("http://flag.example/debian", ""); err != nil || got != "http://flag.example/debian" {
		t.Errorf("flag: got %q, %v", got, err)
	}
	if got, err := ResolveMirror("", ""); err != nil || got != "http://env.example/debian" {
		t.Errorf("env: got %q, %v", got, err)
	}
	if _, err := ResolveMirror("not a uri", ""); err == nil {
		t.Error("bad flag accepted")
	}
}

// TestCheckMirrorURI: only known schemes, and nothing that could end the
// URI where klab writes it, from every source.
func TestCheckMirrorURI(t *testing.T) {
	for _, ok := range []string{
		"http://mirror.example/debian", "https://mirror.example/debian/", "file:/srv/debian", "file:///srv/debian",
		"mirror+file:/etc/apt/mirrors/debian.list", "mirror+https://mirror.example/list",
	} {
		if _, err := CheckMirrorURI(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"mirror.example/debian", "ftp://mirror.example/debian", "http:/x", "http://", "file:", "javascript:x",
		"http://mirror.example/debian stable main", "http://m.example/d\vx", "http://m.example/d\fx", "http://m.example/d\rx",
		"http://m.example/debian#comment", "http://m.example/[x]", "http://m.example/\"x", "http://m.example/\x1b[2J",
	} {
		if _, err := CheckMirrorURI(bad); err == nil || !strings.Contains(err.Error(), "not a usable mirror URI") {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
	// From the host's sources too.
	root := t.TempDir()
	list := filepath.Join(root, "etc/apt/sources.list")
	os.MkdirAll(filepath.Dir(list), 0o755)
	os.WriteFile(list, []byte("deb http://mirror.example/deb\x1bian bookworm main\n"), 0o644)
	if _, err := debianMirror(root); err == nil || !strings.Contains(err.Error(), "not a usable mirror URI") {
		t.Errorf("a host source with a control character: %v", err)
	}
}

// writeFile writes path, making its directory.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
