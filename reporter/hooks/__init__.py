"""The hooks both agent tools run (`ctxbudget hook`): their input, what they answer, and `hooks install`."""
