//! End-to-end tests across server and agent, one module per area, linked into one test
//! binary (one link instead of twelve; a clean build's target dir is GBs smaller).

mod agent_durability;
mod agent_support;
mod agent_tasks;
mod grpc;
mod sim_disconnect;
mod sim_heartbeats;
mod sim_reports;
mod sim_scale;
mod sim_services;
mod sim_start;
mod sim_storm;
mod task_isolation;
mod task_lifecycle;
mod task_secrets;
