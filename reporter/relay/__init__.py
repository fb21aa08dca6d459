"""The relay on the worker: master actions acknowledged and completed, the handoff package assembled and posted, and
`ctxbudget handoff`."""
