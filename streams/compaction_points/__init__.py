"""Where the fleet sees each tool compact: the finished compactions re-keyed by point, learned per point
(`core.fleet_points`)."""
