// Package clock is the time source components read, and a fake of it that
// tests move by hand.
//
// Components keep taking a `Now func() time.Time` in their options (the
// storage, the probes, the local readings, the downsampler, the demo
// fleet); Clock is that method as an interface, so that time.Now's
// stand-in, Real, and (*Fake).Now both fit either shape:
//
//	opts.Now = fake.Now
//
// A Fake only tells the time: it fires no timers and wakes no sleepers.
// Code that sleeps or waits on a ticker is tested with testing/synctest,
// whose bubble fakes time.Now, timers and sleeps together.
package clock
