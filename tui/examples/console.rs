//! Runs the console on its own, before the `drover` binary wires it in:
//! `cargo run -p drover-tui --example console -- [ADDRESS] [--read-only] [--mouse]`.

#[tokio::main]
async fn main() -> Result<(), drover_tui::ConsoleError> {
    let mut address = "http://127.0.0.1:4647".to_owned();
    let mut read_only = false;
    let mut mouse = false;
    for arg in std::env::args().skip(1) {
        if arg == "--read-only" {
            read_only = true;
        } else if arg == "--mouse" {
            mouse = true;
        } else {
            address = arg;
        }
    }
    drover_tui::run(drover_tui::ConsoleOptions {
        address,
        read_only,
        tls: Default::default(),
        mouse,
        token: std::env::var("DROVER_TOKEN").ok(),
    })
    .await
}
