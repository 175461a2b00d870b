package dgramio

import "github.com/dgramio/dgramio/internal/core"

type openFunc func(core.Config) (core.Backend, error)

// opener returns the constructor of kind, if this build has one.
func opener(kind string) (openFunc, bool) {
	switch kind {
	}
	return nil, false
}
