"""Library baselines: where each library comes from (config/baselines.yaml), how it is prepared
(pip package, git commit plus build steps, existing install), and parsers that turn what each
upstream benchmark prints into gicomm records."""
