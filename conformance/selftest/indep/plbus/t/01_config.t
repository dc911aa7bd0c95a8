use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;

sub run_bus {
    my @args = @_;
    my $pid = fork // die;
    if (!$pid) { open STDIN, '<', '/dev/null'; open STDOUT, '>', "$DIR/out"; open STDERR, '>', "$DIR/err"; exec "$ROOT/plbus", @args; exit 127 }
    local $SIG{ALRM} = sub { kill 'KILL', $pid }; alarm 10;
    waitpid($pid, 0); alarm 0;
    my $st = $? >> 8;
    open my $fh, '<', "$DIR/err"; local $/; my $err = <$fh> // '';
    open my $fo, '<', "$DIR/out"; my $out = <$fo> // '';
    return ($st, $err, $out);
}

my $w = worker_cmd();
my @bad = (
    [ 'not json', '{ pools: ', qr/not valid JSON/ ],
    [ 'root array', '[]', qr/root must be a JSON object/ ],
    [ 'no pools', '{}', qr/'pools' is required/ ],
    [ 'empty pools', '{"pools":[]}', qr/at least one pool/ ],
    [ 'missing id', qq({"pools":[{"command":"$w","instances":1}]}), qr/id is required/ ],
    [ 'dup id', qq({"pools":[{"id":"a","command":"$w","instances":1},{"id":"a","command":"$w","instances":1}]}), qr/duplicate pool id/ ],
    [ 'missing command', '{"pools":[{"id":"a","instances":1}]}', qr/'command' is required/ ],
    [ 'bad command', '{"pools":[{"id":"a","command":"/nonexistent/x","instances":1}]}', qr/not an executable/ ],
    [ 'instances 0', qq({"pools":[{"id":"a","command":"$w","instances":0}]}), qr/instances/ ],
    [ 'instances missing', qq({"pools":[{"id":"a","command":"$w"}]}), qr/instances/ ],
    [ 'instances string', qq({"pools":[{"id":"a","command":"$w","instances":"2"}]}), qr/instances/ ],
    [ 'args not array', qq({"pools":[{"id":"a","command":"$w","instances":1,"args":"x"}]}), qr/args/ ],
    [ 'limit string', qq({"pools":[{"id":"a","command":"$w","instances":1}],"limits":{"max_input_buffer":"10"}}), qr/max_input_buffer must be a number/ ],
    [ 'limit negative', qq({"pools":[{"id":"a","command":"$w","instances":1}],"limits":{"max_restarts":-1}}), qr/max_restarts/ ],
    [ 'too many instances', qq({"pools":[{"id":"a","command":"$w","instances":600}]}), qr/MAX_CONNECTIONS/ ],
);
for my $b (@bad) {
    my $cfg = write_config(raw => $b->[1]);
    my ($st, $err, $out) = run_bus('--config', $cfg, '--stdio');
    is($st, 1, "$b->[0]: exit 1");
    like($err, $b->[2], "$b->[0]: message");
    like($err, qr/ERROR plbus\[\d+\] config:/, "$b->[0]: logged as ERROR");
    is($out, '', "$b->[0]: nothing on stdout");
}
{
    my ($st, $err) = run_bus('--config', "$DIR/does-not-exist.json");
    is($st, 1, 'missing config file: exit 1');
    like($err, qr/cannot read config/, 'missing config file: message');
}
my $good = write_config(instances => 1);
for my $u ([ [], 'no args' ], [ [ '--stdio' ], 'no --config' ], [ [ '--config', $good, '--bogus' ], 'unknown flag' ],
           [ [ '--config', $good, '--unix', "$DIR/s", '--tcp', '127.0.0.1:0' ], 'two modes' ],
           [ [ '--config', $good, '--tcp', 'nonsense' ], 'bad tcp addr' ], [ [ '--config' ], 'missing value' ]) {
    my ($st, $err, $out) = run_bus(@{ $u->[0] });
    is($st, 2, "usage error ($u->[1]): exit 2");
    is($out, '', "usage error ($u->[1]): nothing on stdout");
}
{
    # limits omitted / partially given / null -> defaults; unknown keys tolerated
    my $cfg = write_config(raw => qq({"pools":[{"id":"a","command":"$w","instances":1,"x":1}],"limits":{"max_restarts":2,"drain_timeout_sec":null,"bogus":1},"extra":true}));
    my $bus = BusTest::start_bus(config => $cfg);
    like($bus->log_text, qr/max_restarts=2/, 'given limit applied');
    like($bus->log_text, qr/drain_timeout_sec=30\b/, 'null limit -> default');
    like($bus->log_text, qr/max_input_buffer=1048576,max_output_queue=4194304/, 'omitted limits -> defaults');
    like($bus->log_text, qr/WARN .*ignoring unknown/, 'unknown keys warned');
    $bus->close_stdin; is($bus->wait_exit, 0, 'exit 0');
}
{
    # command found via PATH, args passed
    my $cfg = write_config(raw => qq({"pools":[{"id":"sh","command":"sh","args":["-c","exec $w"],"instances":1}]}));
    my $bus = BusTest::start_bus(config => $cfg);
    $bus->send_raw(qq({"id":1,"method":"hi"}\n));
    my $l = $bus->read_line;
    like($l, qr/"method":"hi"/, 'PATH command with args works');
    $bus->close_stdin; is($bus->wait_exit, 0, 'exit 0');
}
{
    my $cfg = write_config(instances => 1);
    my $bus = BusTest::start_bus(config => $cfg, mode => 'unix');
    my $other = BusTest::start_bus(config => $cfg, extra => [], mode => 'stdio', no_wait => 1);
    ok(1);
    $other->stop;
    # second daemon on the same live unix socket path
    my ($st, $err) = run_bus('--config', $cfg, '--unix', $bus->{sock});
    is($st, 3, 'socket in use: exit 3');
    is($bus->stop, 0, 'first daemon exits 0');
}
done_testing;
