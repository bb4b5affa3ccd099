//! The `drover` binary's end-to-end tests, one module per area, linked into one test
//! binary (each used to be a binary of its own, linked against the server and agent; one
//! link instead of 27 keeps a clean build several GB smaller and faster).

mod cli_acl;
mod cli_alloc;
mod cli_attacks;
mod cli_bench;
mod cli_cluster;
mod cli_console_deployments;
mod cli_console_failover;
mod cli_deployments;
mod cli_dev;
mod cli_docker;
mod cli_drain;
mod cli_failover;
mod cli_jobs;
mod cli_membership;
mod cli_operator;
mod cli_partition;
mod cli_ports;
mod cli_readme_tls;
mod cli_readme_using;
mod cli_services;
mod cli_startup;
mod cli_support;
mod cli_task_inputs;
mod cli_tls;
mod cli_tls_errors;
mod cli_usage;
mod cli_vars;
mod http_python;
