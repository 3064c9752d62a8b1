"""gemma4-t4: wiring only. The stack program (gemma4_t4.program) reads the stack's config into its
cloud's component Args, refusing a bad value before anything is registered, builds that one
component, and exports the contract's outputs (gemma4_t4.contract) and the component's own."""

from gemma4_t4.program import main

main()
