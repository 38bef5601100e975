"""Reports: paper-style tables (CSV and markdown), plots and machine-readable summaries."""
