//! The console's initial load against a server answering in small pages: everything is
//! read, every page followed, and a job purged between the job list and its allocations is
//! left out, as `drover bench` will time it against a real server.

mod support {
    // Shared with the load benchmark, which uses the rest of it.
    #[allow(dead_code)]
    pub mod fake_cluster;
}

use support::fake_cluster::{FakeCluster, FakeJob};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initial_load_reads_every_page_of_every_list() {
    let job = |id: &str, allocs, purged| FakeJob {
        id: id.into(),
        allocs,
        purged,
    };
    let address = FakeCluster {
        nodes: 7,
        // More jobs than are read at once, so reads start as others end.
        jobs: (0..11)
            .map(|j| job(&format!("job-{j}"), j, false))
            .chain([job("gone", 4, true), job("web", 13, false)])
            .collect(),
        page: 2,
    }
    .serve()
    .await;
    let load = drover_tui::net::load::measure_initial_load(&address, None)
        .await
        .expect("the fake server answers");
    assert_eq!(
        (load.nodes, load.jobs, load.allocs, load.evals),
        (7, 12, (0..11).sum::<u64>() as usize + 13, 0)
    );
    assert_eq!(load.total(), load.read + load.build);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_an_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = listener.local_addr().expect("its address").to_string();
    drop(listener);
    let error = drover_tui::net::load::measure_initial_load(&address, None)
        .await
        .expect_err("nobody listens");
    assert!(
        error.to_string().starts_with("loading the cluster failed"),
        "{error}"
    );
}
