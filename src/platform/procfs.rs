//! What Linux's `/proc` says of processes: which exist, and of one its state, parent and process
//! group (`stat`), its environment, its command name and its open sockets, and which TCP socket
//! has given ends, for the checks the daemon and the CLI make of a process they did not start.

use std::io::{self, BufRead};
use std::net::SocketAddr;

/// Every process id `/proc` lists; an error where there is no `/proc` to read.
pub fn pids() -> io::Result<Vec<u32>> {
    Ok(std::fs::read_dir("/proc")?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            name.parse().ok()
        })
        .collect())
}

/// The fields of `/proc/<pid>/stat` after the command name: the state first (`Z` for a zombie),
/// the parent's pid second, the process group third. The command name may hold anything, a `)`
/// or spaces included, so the fields are read after its last `)`.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The environment process `pid` started with (`NAME=value` entries, each ended by a NUL), as
/// the kernel keeps it: readable only for this user's own processes.
pub fn environ(pid: u32) -> io::Result<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/environ"))
}

/// The command name of process `pid` (its executable's name, at most 15 bytes, newline-ended).
pub fn comm(pid: u32) -> io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
}

/// The inode of the TCP socket of this network namespace whose own end is `local` and whose other
/// end is `remote` (`/proc/net/tcp`, or `tcp6` for IPv6 ends), `None` when there is none: the
/// other end of a loopback connection is listed as a socket of its own, so this names the
/// client's socket of a connection a server accepted. Read line by line: the table can be long.
pub fn tcp_socket_inode(local: SocketAddr, remote: SocketAddr) -> io::Result<Option<u64>> {
    let table = match local {
        SocketAddr::V4(_) => "/proc/net/tcp",
        SocketAddr::V6(_) => "/proc/net/tcp6",
    };
    let (local, remote) = (kernel_address(local), kernel_address(remote));
    let reader = io::BufReader::new(std::fs::File::open(table)?);
    // After the header: `sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode`.
    for line in reader.lines().skip(1) {
        let line = line?;
        let fields: Vec<&str> = line.split_whitespace().take(10).collect();
        if fields.len() == 10
            && fields[1].eq_ignore_ascii_case(&local)
            && fields[2].eq_ignore_ascii_case(&remote)
        {
            return Ok(fields[9].parse().ok().filter(|&inode| inode != 0));
        }
    }
    Ok(None)
}

/// An address as `/proc/net/tcp*` writes it: the address's bytes as 32-bit words each printed in
/// hexadecimal as this machine reads the word, a colon, the port in hexadecimal.
fn kernel_address(address: SocketAddr) -> String {
    let octets: Vec<u8> = match address {
        SocketAddr::V4(v4) => v4.ip().octets().to_vec(),
        SocketAddr::V6(v6) => v6.ip().octets().to_vec(),
    };
    let words: String = octets
        .chunks_exact(4)
        .map(|word| {
            format!(
                "{:08X}",
                u32::from_ne_bytes(word.try_into().expect("4 bytes"))
            )
        })
        .collect();
    format!("{words}:{:04X}", address.port())
}

/// Whether process `pid` has the socket `inode` among its open files (`/proc/<pid>/fd`, readable
/// only for this user's own processes: another user's process reads as holding nothing).
pub fn holds_socket(pid: u32, inode: u64) -> bool {
    let wanted = format!("socket:[{inode}]");
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        std::fs::read_link(entry.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ends of a loopback connection this process holds are found, each as its own socket,
    /// and this process holds both; ends no socket has are not.
    #[test]
    fn the_client_end_of_a_loopback_connection_is_found_and_held() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let (ours, theirs) = (server.local_addr().unwrap(), server.peer_addr().unwrap());
        let client_socket = tcp_socket_inode(theirs, ours)
            .unwrap()
            .expect("the client's end");
        let server_socket = tcp_socket_inode(ours, theirs)
            .unwrap()
            .expect("the server's end");
        assert_ne!(client_socket, server_socket);
        assert!(holds_socket(std::process::id(), client_socket));
        assert!(holds_socket(std::process::id(), server_socket));
        drop(client);
        let unused: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(tcp_socket_inode(unused, ours).unwrap(), None);
    }

    #[test]
    fn an_address_is_written_as_the_kernel_writes_it() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(kernel_address(v4), "0100007F:1F90");
            assert_eq!(kernel_address(v6), "00000000000000000000000001000000:0050");
        } else {
            assert_eq!(kernel_address(v4), "7F000001:1F90");
        }
    }
}
