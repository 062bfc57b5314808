package userspace

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

// account is one user and its own group.
type account struct {
	name     string
	uid      int
	home     string
	shell    string
	testUser bool
}

// accounts are the users of a userspace: Debian's base accounts that
// tests name (bin and sys groups, nobody), and the ones fstests expects
// (fsgqa, fsgqa2, and 123456-fsgqa for names that start with digits),
// each with a group of its own name and id.
func accounts() []account {
	const nologin = "/usr/sbin/nologin"
	return []account{
		{name: "root", uid: 0, home: "/root", shell: "/bin/bash"},
		{name: "daemon", uid: 1, home: "/usr/sbin", shell: nologin},
		{name: "bin", uid: 2, home: "/bin", shell: nologin},
		{name: "sys", uid: 3, home: "/dev", shell: nologin},
		{name: "fsgqa", uid: 1000, home: "/home/fsgqa", shell: "/bin/bash", testUser: true},
		{name: "fsgqa2", uid: 1001, home: "/home/fsgqa2", shell: "/bin/bash", testUser: true},
		{name: "123456-fsgqa", uid: 1002, home: "/home/123456-fsgqa", shell: "/bin/bash", testUser: true},
		{name: "nobody", uid: 65534, home: "/nonexistent", shell: nologin},
	}
}

// groupsOnly are groups without a user of the same name.
var groupsOnly = []struct {
	name string
	gid  int
}{{"adm", 4}, {"tty", 5}, {"disk", 6}, {"users", 100}}

// userNames are the test users, for the descriptor.
func userNames() []string {
	var out []string
	for _, a := range accounts() {
		if a.testUser {
			out = append(out, a.name)
		}
	}
	return out
}

// passwdFiles returns /etc/passwd, /etc/group, /etc/shadow and
// /etc/gshadow for accounts. Passwords are locked; root switches users
// with su without one.
func passwdFiles() map[string]string {
	var passwd, group, shadow, gshadow strings.Builder
	groups := map[int]string{}
	var gids []int
	for _, a := range accounts() {
		gecos := a.name
		if a.testUser {
			gecos = "fstests user"
		}
		fmt.Fprintf(&passwd, "%s:x:%d:%d:%s:%s:%s\n", a.name, a.uid, a.uid, gecos, a.home, a.shell)
		fmt.Fprintf(&shadow, "%s:*:20000:0:99999:7:::\n", a.name)
		groups[a.uid] = a.name
		gids = append(gids, a.uid)
	}
	for _, g := range groupsOnly {
		groups[g.gid] = g.name
		gids = append(gids, g.gid)
	}
	slices.Sort(gids)
	for _, gid := range gids {
		name := groups[gid]
		if gid == 65534 {
			name = "nogroup"
		}
		fmt.Fprintf(&group, "%s:x:%d:\n", name, gid)
		fmt.Fprintf(&gshadow, "%s:*::\n", name)
	}
	return map[string]string{
		"/etc/passwd":  passwd.String(),
		"/etc/group":   group.String(),
		"/etc/shadow":  shadow.String(),
		"/etc/gshadow": gshadow.String(),
	}
}

// baseEtc are the /etc files a Debian base system gets from packages
// not in a userspace (base-passwd, netbase's hosts) or from maintainer
// scripts; a package's own file wins when it ships one.
var baseEtc = map[string]string{
	"/etc/hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"/etc/hostname":      "klab\n",
	"/etc/nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n",
	"/etc/shells":        "/bin/sh\n/usr/bin/sh\n/bin/bash\n/usr/bin/bash\n/bin/dash\n/usr/bin/dash\n",
	// pam-auth-update writes these from libpam-runtime's postinst; su and
	// runuser include them. Root needs no password (pam_rootok comes
	// first in su's own file).
	"/etc/pam.d/common-auth":                   "auth\t[success=1 default=ignore]\tpam_unix.so nullok\nauth\trequisite\tpam_deny.so\nauth\trequired\tpam_permit.so\n",
	"/etc/pam.d/common-account":                "account\t[success=1 new_authtok_reqd=done default=ignore]\tpam_unix.so\naccount\trequisite\tpam_deny.so\naccount\trequired\tpam_permit.so\n",
	"/etc/pam.d/common-session":                "session\t[default=1]\tpam_permit.so\nsession\trequisite\tpam_deny.so\nsession\trequired\tpam_permit.so\nsession\trequired\tpam_unix.so\n",
	"/etc/pam.d/common-session-noninteractive": "session\t[default=1]\tpam_permit.so\nsession\trequisite\tpam_deny.so\nsession\trequired\tpam_permit.so\nsession\trequired\tpam_unix.so\n",
	"/etc/pam.d/common-password":               "password\t[success=1 default=ignore]\tpam_unix.so obscure yescrypt\npassword\trequisite\tpam_deny.so\npassword\trequired\tpam_permit.so\n",
}

// writeEtc writes the accounts (always: no package of a userspace
// provides them), the base /etc files a package did not ship, the test
// users' home directories, and /etc/mtab.
func writeEtc(tree string) error {
	for p, data := range passwdFiles() {
		mode := os.FileMode(0o644)
		if strings.Contains(p, "shadow") {
			mode = 0o640
		}
		if err := writeTreeFile(tree, p, data, mode); err != nil {
			return err
		}
	}
	for p, data := range baseEtc {
		if strings.HasPrefix(p, "/etc/pam.d/") && resolveInTree(tree, "/etc/pam.d") == "" {
			continue
		}
		if exists(tree, p) {
			continue
		}
		if err := writeTreeFile(tree, p, data, 0o644); err != nil {
			return err
		}
	}
	for _, a := range accounts() {
		if !a.testUser {
			continue
		}
		h := treeFile(tree, a.home)
		if h == "" {
			return fmt.Errorf("no directory for %s in the tree", a.home)
		}
		if err := os.Mkdir(h, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		if err := os.Lchown(h, a.uid, a.uid); err != nil && os.Geteuid() == 0 {
			return err
		}
	}
	if mtab := treeFile(tree, "/etc/mtab"); mtab != "" && !exists(tree, "/etc/mtab") {
		return os.Symlink("../proc/self/mounts", mtab)
	}
	return nil
}

// writeTreeFile replaces the tree's file p with data.
func writeTreeFile(tree, p, data string, mode os.FileMode) error {
	host := treeFile(tree, p)
	if host == "" {
		if err := os.MkdirAll(inTree(tree, path.Dir(p)), 0o755); err != nil {
			return err
		}
		if host = treeFile(tree, p); host == "" {
			return fmt.Errorf("no directory for %s in the tree", p)
		}
	}
	_ = os.Remove(host)
	if err := os.WriteFile(host, []byte(data), mode); err != nil {
		return err
	}
	return os.Chmod(host, mode)
}
