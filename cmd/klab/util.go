package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"klab/images"
	"klab/images/debian"
	"klab/internal/option"
)

// flagNames names the flag of each option error (*option.Error) in err:
// err itself, the errors it joins, and the error inside a wrapper that
// adds nothing to its message (a bad-input marker). The libraries' option
// names are klab's flags without their dashes.
func flagNames(err error) error {
	switch e := err.(type) {
	case *option.Error:
		return fmt.Errorf("--%s %w", e.Name, e.Err)
	case interface{ Unwrap() []error }:
		var errs []error
		for _, x := range e.Unwrap() {
			errs = append(errs, flagNames(x))
		}
		return errors.Join(errs...)
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil && inner.Error() == err.Error() {
			return flagNames(inner)
		}
	}
	return err
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

// accels are the values of --accel.
func accels() []string { return []string{"auto", "kvm", "tcg"} }

func checkAccel(a string) error {
	for _, x := range accels() {
		if a == x {
			return nil
		}
	}
	return fmt.Errorf("--accel %q: want %s", a, orList(accels()))
}

// checkFlavour refuses a --flavour that images does not take.
func checkFlavour(f string) error {
	if !slices.Contains(debianFlavours(), f) {
		return fmt.Errorf("--flavour %q: want %s", f, orList(debianFlavours()))
	}
	return nil
}

// checkKernelRef refuses a kernel reference (--kernel, or a command's
// argument) that names no kernel klab could use, before any work: see
// images.CheckKernelRef. flavour is the command's --flavour; one that
// checkFlavour refuses is left out (checkFlavour says so once).
func checkKernelRef(g *globalOptions, ref, flavour string) error {
	if checkFlavour(flavour) != nil {
		flavour = ""
	}
	return images.CheckKernelRef(ref, images.ResolveOptions{Debian: debian.Options{CacheDir: g.cacheDir, Flavour: flavour}})
}

// debianSeries are the upstream series of debian:<series>, as images
// lists them in its errors.
func debianSeries() []string { return debian.Series() }

// debianFlavours are the Debian kernel flavours images accepts, the
// default first (TestHelpListsAgree checks them against images' errors).
func debianFlavours() []string { return []string{"cloud-amd64", "amd64", "rt-amd64"} }

// flavourUsage is the --help text of every --flavour flag.
func flavourUsage() string {
	return "Debian kernel flavour: " + orList(debianFlavours())
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
