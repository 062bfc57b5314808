package main

import (
	"fmt"
	"time"
)

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

func checkAccel(a string) error {
	switch a {
	case "auto", "kvm", "tcg":
		return nil
	}
	return fmt.Errorf("--accel %q: want auto, kvm or tcg", a)
}
