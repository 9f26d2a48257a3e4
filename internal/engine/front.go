package engine

import "github.com/hetsched/hetsched/internal/core"

// What a front end needs of the core's types. A front end reaches the
// core only through the engine (the layer rule, internal/layers), so the
// engine names them for it.
type (
	// CoreConfig configures the core an engine owns (Config.Core).
	CoreConfig = core.Config
	// Result is how a task's command ended (Finished).
	Result = core.Result
)

// DefaultCoreConfig is the core's default configuration.
func DefaultCoreConfig() CoreConfig { return core.DefaultConfig() }
