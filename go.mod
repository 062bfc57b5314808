module klab

go 1.26.0

require (
	github.com/digitalocean/go-qemu v0.0.0-20250212194115-ee9b0668d242
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/klauspost/compress v1.20.4
	github.com/rhysd/actionlint v1.7.12
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	github.com/u-root/gobusybox/src v0.0.0-20250101170133-2e884e4509c7
	github.com/u-root/mkuimage v0.0.0-20250905073043-9a40452f5d3b
	github.com/u-root/uio v0.0.0-20240224005618-d2acac8f3701
	github.com/ulikunitz/xz v0.5.17
	github.com/vbauerster/mpb/v8 v8.16.2
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.47.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/VividCortex/ewma v1.2.0 // indirect
	github.com/acarl005/stripansi v0.0.0-20180116102854-5a71ef0e047d // indirect
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/atotto/clipboard v0.1.4 // indirect
	github.com/aymanbagabas/go-osc52/v2 v2.0.1 // indirect
	github.com/bmatcuk/doublestar/v4 v4.10.0 // indirect
	github.com/charmbracelet/bubbles v0.16.1 // indirect
	github.com/charmbracelet/bubbletea v0.24.1 // indirect
	github.com/charmbracelet/lipgloss v0.7.1 // indirect
	github.com/clipperhouse/uax29/v2 v2.7.0 // indirect
	github.com/containerd/console v1.0.4-0.20230706203907-8f6c4e4faef5 // indirect
	github.com/digitalocean/go-libvirt v0.0.0-20220804181439-8648fbde413e // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/hugelgupf/go-shlex v0.0.0-20200702092117-c80c9d0918fa // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/pgzip v1.2.6 // indirect
	github.com/knz/bubbline v0.0.0-20230717192058-486954f9953f // indirect
	github.com/lucasb-eyer/go-colorful v1.2.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/mattn/go-localereader v0.0.1 // indirect
	github.com/mattn/go-runewidth v0.0.30 // indirect
	github.com/mattn/go-shellwords v1.0.12 // indirect
	github.com/muesli/ansi v0.0.0-20230316100256-276c6243b2f6 // indirect
	github.com/muesli/cancelreader v0.2.2 // indirect
	github.com/muesli/reflow v0.3.0 // indirect
	github.com/muesli/termenv v0.15.1 // indirect
	github.com/peterh/liner v1.2.2 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	github.com/rck/unit v0.0.3 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/sahilm/fuzzy v0.1.0 // indirect
	github.com/stretchr/testify v1.7.1 // indirect
	github.com/u-root/u-root v0.16.0 // indirect
	github.com/vbauerster/cupwriter v0.0.5 // indirect
	github.com/vishvananda/netlink v1.3.0 // indirect
	github.com/vishvananda/netns v0.0.4 // indirect
	go.yaml.in/yaml/v4 v4.0.0-rc.3 // indirect
	golang.org/x/exp v0.0.0-20260824195058-e88cd73687aa // indirect
	golang.org/x/image v0.46.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	mvdan.cc/sh/v3 v3.11.0 // indirect
)

tool (
	github.com/u-root/u-root/cmds/core/cat
	github.com/u-root/u-root/cmds/core/chmod
	github.com/u-root/u-root/cmds/core/cp
	github.com/u-root/u-root/cmds/core/dd
	github.com/u-root/u-root/cmds/core/df
	github.com/u-root/u-root/cmds/core/dmesg
	github.com/u-root/u-root/cmds/core/echo
	github.com/u-root/u-root/cmds/core/false
	github.com/u-root/u-root/cmds/core/find
	github.com/u-root/u-root/cmds/core/free
	github.com/u-root/u-root/cmds/core/gosh
	github.com/u-root/u-root/cmds/core/grep
	github.com/u-root/u-root/cmds/core/head
	github.com/u-root/u-root/cmds/core/hexdump
	github.com/u-root/u-root/cmds/core/init
	github.com/u-root/u-root/cmds/core/insmod
	github.com/u-root/u-root/cmds/core/kill
	github.com/u-root/u-root/cmds/core/ln
	github.com/u-root/u-root/cmds/core/ls
	github.com/u-root/u-root/cmds/core/lsmod
	github.com/u-root/u-root/cmds/core/mkdir
	github.com/u-root/u-root/cmds/core/mount
	github.com/u-root/u-root/cmds/core/mv
	github.com/u-root/u-root/cmds/core/poweroff
	github.com/u-root/u-root/cmds/core/printenv
	github.com/u-root/u-root/cmds/core/ps
	github.com/u-root/u-root/cmds/core/readlink
	github.com/u-root/u-root/cmds/core/rm
	github.com/u-root/u-root/cmds/core/rmmod
	github.com/u-root/u-root/cmds/core/seq
	github.com/u-root/u-root/cmds/core/sleep
	github.com/u-root/u-root/cmds/core/sort
	github.com/u-root/u-root/cmds/core/sync
	github.com/u-root/u-root/cmds/core/tail
	github.com/u-root/u-root/cmds/core/tee
	github.com/u-root/u-root/cmds/core/timeout
	github.com/u-root/u-root/cmds/core/touch
	github.com/u-root/u-root/cmds/core/true
	github.com/u-root/u-root/cmds/core/truncate
	github.com/u-root/u-root/cmds/core/umount
	github.com/u-root/u-root/cmds/core/uname
	github.com/u-root/u-root/cmds/core/uptime
	github.com/u-root/u-root/cmds/core/wc
)

replace github.com/charmbracelet/bubbletea v0.24.1 => github.com/charmbracelet/bubbletea v0.24.2

replace github.com/charmbracelet/bubbles => github.com/charmbracelet/bubbles v0.15.1-0.20230123181021-a6a12c4a31eb
