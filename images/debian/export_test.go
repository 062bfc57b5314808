package debian

// WithAptStage returns o with apt's staging directories under dir (see
// apt.Options.StageRoot), for the tests of package debian_test.
func WithAptStage(o Options, dir string) Options {
	o.aptStage = dir
	return o
}
