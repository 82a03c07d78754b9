"""The operators' web console at /console, rendered over the control plane's services."""
