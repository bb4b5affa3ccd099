//! A task's port variables, under Nomad's names, from the ports its allocation holds: for
//! each label, where to bind (`NOMAD_PORT_<label>`: the mapped `to` port when set, else the
//! host port, and `NOMAD_IP_<label>`) and where the port is reached from outside
//! (`NOMAD_HOST_PORT_<label>`, `NOMAD_ADDR_<label>` as `ip:port`, `[ip]:port` for IPv6),
//! plus `NOMAD_ALLOC_PORT_<label>`, `NOMAD_HOST_IP_<label>` and `NOMAD_HOST_ADDR_<label>`.
//! Kept apart from the rest of the environment so the two grow independently.

use drover_core::types::AllocatedPort;

/// The variables for `ports`, in label order of the allocation.
pub fn port_env(ports: &[AllocatedPort]) -> Vec<(String, String)> {
    let mut env = Vec::with_capacity(ports.len() * 7);
    for p in ports {
        let label = p.label.as_str();
        let ip = p.host_ip.to_string();
        let addr = p.socket().to_string();
        let task_port = p.task_port().to_string();
        env.push((format!("NOMAD_PORT_{label}"), task_port.clone()));
        env.push((format!("NOMAD_ALLOC_PORT_{label}"), task_port));
        env.push((format!("NOMAD_HOST_PORT_{label}"), p.value.to_string()));
        env.push((format!("NOMAD_IP_{label}"), ip.clone()));
        env.push((format!("NOMAD_HOST_IP_{label}"), ip));
        env.push((format!("NOMAD_ADDR_{label}"), addr.clone()));
        env.push((format!("NOMAD_HOST_ADDR_{label}"), addr));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn each_label_says_where_to_bind_and_where_it_is_reached() {
        let ports = [
            AllocatedPort {
                label: "http".into(),
                value: 21042,
                to: 0,
                host_ip: "10.0.0.4".parse().expect("ip"),
            },
            AllocatedPort {
                label: "admin".into(),
                value: 8080,
                to: 80,
                host_ip: "2001:db8::4".parse().expect("ip"),
            },
        ];
        let env: BTreeMap<String, String> = port_env(&ports).into_iter().collect();
        for (key, want) in [
            ("NOMAD_PORT_http", "21042"),
            ("NOMAD_ALLOC_PORT_http", "21042"),
            ("NOMAD_HOST_PORT_http", "21042"),
            ("NOMAD_IP_http", "10.0.0.4"),
            ("NOMAD_ADDR_http", "10.0.0.4:21042"),
            ("NOMAD_PORT_admin", "80"),
            ("NOMAD_ALLOC_PORT_admin", "80"),
            ("NOMAD_HOST_PORT_admin", "8080"),
            ("NOMAD_HOST_IP_admin", "2001:db8::4"),
            ("NOMAD_ADDR_admin", "[2001:db8::4]:8080"),
            ("NOMAD_HOST_ADDR_admin", "[2001:db8::4]:8080"),
        ] {
            assert_eq!(env.get(key).map(String::as_str), Some(want), "{key}");
        }
        assert_eq!(env.len(), 14);
    }
}
