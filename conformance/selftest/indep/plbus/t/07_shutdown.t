use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;
use Time::HiRes qw(sleep time);
use IO::Socket::UNIX;

{   # plain SIGTERM, unix mode
    my $bus = start_bus(config => write_config(instances => 2), mode => 'unix');
    my $c = $bus->connect;
    $c->send({ id => 1, method => 'stderr' });
    is($c->read_msg->{id}, 1, 'served');
    ok($bus->wait_log(qr/^diagnostic from \d+$/m), 'worker stderr passed through to daemon stderr');
    $bus->signal('TERM');
    is($bus->wait_exit(10), 0, 'exit 0');
    ok($c->is_closed(1), 'client connection closed');
    ok(!-e $bus->{sock}, 'unix socket removed');
    like($bus->log_text, qr/stopped listening.*\n(?:.*\n)*.*killed by signal 15/, 'listener closed before workers stopped');
    like($bus->log_text, qr/shutdown complete/, 'complete');
}
{   # workers that take time on SIGTERM are waited for
    my $bus = start_bus(config => write_config(instances => 2, args => ['--slow-term', '--chatty']), mode => 'unix');
    ok(wait_until(sub { $bus->count_log(qr/^worker \d+ started/m) == 2 }), 'workers up');
    my $t0 = time;
    $bus->signal('TERM');
    ok(wait_until(sub { !-e $bus->{sock} }, 2), 'stops accepting at once');
    ok(!IO::Socket::UNIX->new(Peer => $bus->{sock}), 'new connections refused during drain');
    is($bus->wait_exit(10), 0, 'exit 0');
    my $dt = time - $t0;
    cmp_ok($dt, '>=', 0.9, "waited for slow workers ($dt s)");
    is(() = $bus->log_text =~ /exited with code 0/g, 2, 'both exited by themselves');
    unlike($bus->log_text, qr/SIGKILL/, 'no SIGKILL needed');
}
{   # workers ignoring SIGTERM are killed after drain_timeout_sec
    my $bus = start_bus(config => write_config(instances => 2, args => ['--ignore-term', '--linger', '--chatty'], limits => { drain_timeout_sec => 1 }), mode => 'unix');
    ok(wait_until(sub { $bus->count_log(qr/^worker \d+ started/m) == 2 }), 'workers up');
    my $t0 = time;
    $bus->signal('INT');
    is($bus->wait_exit(10), 0, 'exit 0');
    my $dt = time - $t0;
    cmp_ok($dt, '>=', 0.9, 'waited drain_timeout_sec');
    cmp_ok($dt, '<', 5, 'but not much longer');
    ok($bus->count_log(qr/WARN .*did not exit within drain_timeout_sec; sending SIGKILL/) == 2, 'SIGKILL logged per worker');
    like($bus->log_text, qr/killed by signal 9/, 'killed');
}
{   # second signal during drain exits immediately
    my $bus = start_bus(config => write_config(instances => 1, args => ['--ignore-term', '--linger', '--chatty'], limits => { drain_timeout_sec => 30 }), mode => 'unix');
    ok(wait_until(sub { $bus->count_log(qr/^worker \d+ started/m) == 1 }), 'worker up');
    my $t0 = time;
    $bus->signal('TERM');
    ok($bus->wait_log(qr/shutting down/), 'shutting down');
    sleep 0.3;
    $bus->signal('TERM');
    is($bus->wait_exit(10), 0, 'exit 0 after second signal');
    cmp_ok(time - $t0, '<', 5, 'quickly');
}
{   # responses produced while workers drain are still delivered (stdio mode)
    my $bus = start_bus(config => write_config(instances => 1, args => ['--slow-term', '--chatty']));
    ok(wait_until(sub { $bus->count_log(qr/^worker \d+ started/m) == 1 }), 'worker up');
    $bus->send_raw(qq({"id":1,"method":"sleep","params":{"ms":300}}\n));
    sleep 0.1;
    $bus->signal('TERM');
    my $l = $bus->read_line(5);
    ok($l && jdec($l)->{id} == 1, 'in-flight response delivered during drain');
    is($bus->wait_exit(10), 0, 'exit 0');
}
done_testing;
