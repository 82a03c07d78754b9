"""Each wire's typical answers, as the demo upstream serves them (leasegate.demo.examples
composes them per provider kind): one module per wire of leasegate.providers, each a
`WireExamples` (base.py)."""
