"""Copies between hosts: the ``rcpd`` roles and the wire between them.

The protocol (roles, connections, frames, versions, security, flow) is documented in
``docs/remote_protocol.md``. Modules:

====================  ==================================================================
``wire``              frames: encoding, and a reader bounded in memory and time
``hello``             the first frame each way; version negotiation; roles
``tls``               per-run identities, pinned certificates, TLS 1.3 contexts
``selfsigned``        a per-run identity's certificate, encoded without ``x509``'s
                      import
``connection``        a framed, authenticated connection: send, read, greet, expect
``handshake``         making a connection: dial, accept, TLS and hellos by one deadline
``sshrole``           a role on another host: rcpd started over SSH, the master's
                      control connection to it
``listening``         where a copy's listeners listen: the address, ``--port-ranges``;
                      ``rcp -v``'s lines of where connections go
``meta``              entry metadata on the wire, rebuilt as ``os.stat_result``
``settingswire``      a copy's settings on the wire (to a daemon or a service, and back)
``send``              the source role: walk, announce directories, queue entries
``sendbatch``         the source role's senders: a batch of entries as frames
``sendlarge``         one large file as ``CHUNK`` frames: holes skipped, resumed after a
                      verified partial, split in parts over several connections
``sendwork``          what the source's senders take: batches, handed-back batches,
                      the parts of split files
``sendcontrol``       the source role's control connection: the destination's answers
``latedata``          the source's late data connections: those a destination adds
                      while the copy runs (its writer processes')
``receive``           the destination role: write entries with the local copy's rules
``receivedtree``      the destination's tree as it arrives: directories being filled,
                      entry names, link ids and kinds checked
``hardlinks``         the destination's hard links: each inode's first name and the
                      later names waiting for it
``writepool``         the destination's writers on a shared storage: ``FILES``
                      frames' entries written by a work pool with adaptive
                      concurrency, within a bound in flight
``writers``           the destination's writer processes: when it starts them, and
                      how many (light; the rest is imported when they start)
``writerhandle``      a writer process from the destination's side: spawned, told the
                      directories, listened to, reaped
``writerprocess``     a writer process: its own data connections, written with the
                      destination's code, accounted for to the destination
``writerchannel``     the messages between a destination and its writer processes
``incoming``          a large file arriving in chunks at the destination
``dry``               a destination that only says what it would do (``--dry-run``)
``roleruntime``       the runtime each role runs under: its host's plugins, retries,
                      fail-early, throttle
``roles``             both roles wired to their connections (``run_source``,
                      ``run_destination``)
``receiving``         a destination's connections served: control answered, data
                      frames written, until its root is finished
``ssh``               starting ``rcpd`` on another host over SSH
``sshcontrol``        one SSH login per host: OpenSSH connection sharing where the
                      user's configuration says nothing of it
``daemon``            ``rcpd --role``: a role started over SSH, talking to its master
``sshmaster``         the master of a copy over SSH: checks the operands, starts the
                      SSH logins (light: before the rest is imported)
``sshcopy``           the roles of a copy over SSH once they log in: control
                      connections, jobs, local roles, results
``outcome``           a service's job or a copy between places judged by the engine's
                      rule; the roles' results, and what they add up to
``service``           ``rcpd serve``: copy jobs and file requests for clients
``job``               one job of a service: its state, progress, summary, and its view
``jobtable``          a service's table of jobs: queued, run, watched, kept a while,
                      run again or failed after a restart
``jobrequests``       what a service's job asks for, what its database keeps of it, and
                      its ``on_restart``
``jobstore``          a service's job database (``--state-dir``): SQLite, WAL, one
                      writer; history pruned by count and age
``httpserver``        a service's HTTP port (``--http-listen``): TLS, the token, the routes
``metrics``           what a service tells Prometheus, read from its jobs at each scrape
``statuspage``        a service's status page: its jobs, escaped, reloading itself
``sdnotify``          systemd's notification protocol: ready, stopping, the watchdog
``rolejobs``          a service's ``send`` and ``receive`` jobs: the service as one role
                      of a copy between hosts
``servicemaster``     the master of a copy through services: this host and a service, or
                      two services
``roots``             a service's paths confined beneath its roots
``client``            a service's client: jobs, and entries to look at, read and write
``clientconnection``  a client's connection to a service: opened on first use, reopened
                      once, every request bounded in time
``entryfds``          an entry beneath the roots through an ``O_PATH`` descriptor: a
                      regular file read, an entry's own mode and times set
``filerequests``      a service's answers to file requests: stat, list, read, write,
                      mkdir, remove, setmeta
``filewire``          file requests on the wire: limits, entries, failures, a request's
                      fields (service and client)
``listing``           a directory listed in pages (``listdir``)
``upload``            the service's side of a file written through it: a temporary
                      renamed into place on commit
``clientupload``      the client's side of a file written through a service: append,
                      then commit or abort
====================  ==================================================================

Nothing here is imported by a local copy (the ``rcp`` command imports the master only
when an operand is remote).
"""

from __future__ import annotations

SERVICE_PORT = 7450
"""The port ``rcpd serve`` listens on unless told another (here, where reading it
costs nothing: Airflow's form shows it at every component's start)."""
