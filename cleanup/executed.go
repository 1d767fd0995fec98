package cleanup

// ExecutedPlan is a plan with what Execute did to each action, as
// `volrecon cleanup -o json` writes it; its JSON is part of schema
// volrecon.v1 (schema/volrecon.v1.json, ExecutedPlan). Each action is an
// ActionResult: the Action's fields, then result, error, csiCalls and
// changed.
type ExecutedPlan struct {
	SchemaVersion string `json:"schemaVersion"`
	// PodsDir is the pods dir the actions were confined to.
	PodsDir string `json:"podsDir,omitempty"`
	// Actions are the plan's actions with their results, in the plan's order.
	Actions []ActionResult `json:"actions"`
	// Notes are the plan's: what evidence of the teardown through the CSI
	// driver could not be gathered.
	Notes []string `json:"notes,omitempty"`
}

// Executed pairs a plan with the results Execute gave for it.
func Executed(plan *ActionPlan, results []ActionResult) *ExecutedPlan {
	if results == nil {
		results = []ActionResult{}
	}
	return &ExecutedPlan{SchemaVersion: plan.SchemaVersion, PodsDir: plan.PodsDir, Actions: results, Notes: plan.Notes}
}
