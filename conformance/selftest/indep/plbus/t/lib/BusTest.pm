package BusTest;
# Small harness for plbus tests: start the daemon, talk to it, read its log.
use strict; use warnings;
use Exporter 'import';
use File::Temp qw(tempdir);
use File::Spec;
use FindBin;
use IO::Socket::UNIX;
use IO::Socket::IP;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);
use JSON::PP;
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);

our @EXPORT = qw(start_bus write_config worker_cmd jenc jdec $ROOT $DIR wait_until);
use Cwd (); our $ROOT = Cwd::abs_path("$FindBin::Bin/..");
our $DIR  = tempdir(CLEANUP => 1);
my $J = JSON::PP->new->canonical;
sub jenc { $J->encode($_[0]) }
sub jdec { JSON::PP->new->decode($_[0]) }
sub worker_cmd { "$ROOT/t/bin/worker.pl" }

my $cfgn = 0;
sub write_config {
    my (%a) = @_;
    my $cfg = $a{raw} // jenc({
        pools => $a{pools} // [ { id => 'echo', command => worker_cmd(), args => $a{args} // [], instances => $a{instances} // 2 } ],
        ($a{limits} ? (limits => $a{limits}) : ()),
    });
    my $p = "$DIR/config" . ++$cfgn . ".json";
    open my $fh, '>', $p or die; print $fh $cfg; close $fh;
    return $p;
}

sub wait_until {
    my ($cond, $timeout) = @_;
    my $end = time + ($timeout // 5);
    while (time < $end) { return 1 if $cond->(); sleep 0.02; }
    return $cond->() ? 1 : 0;
}

# start_bus(config => path, mode => 'stdio'|'unix'|'tcp', extra => [...])
sub start_bus {
    my (%a) = @_;
    my $mode = $a{mode} // 'stdio';
    my $log = "$DIR/bus" . ++$cfgn . ".log";
    my @args = ("$ROOT/plbus", '--config', $a{config}, '--log-level', $a{log_level} // 'debug');
    my $sock;
    if ($mode eq 'unix') { $sock = "$DIR/bus$cfgn.sock"; push @args, '--unix', $sock; }
    elsif ($mode eq 'tcp') { push @args, '--tcp', '127.0.0.1:0'; }
    elsif ($mode eq 'stdio') { push @args, '--stdio' unless $a{no_mode_flag}; }
    push @args, @{ $a{extra} // [] };
    my ($in_r, $in_w, $out_r, $out_w);
    pipe($in_r, $in_w) or die; pipe($out_r, $out_w) or die;
    my $pid = fork // die;
    if (!$pid) {
        open STDIN, '<&', $in_r or die; open STDOUT, '>&', $out_w or die;
        open STDERR, '>', $log or die;
        exec @args or POSIX::_exit(127);
    }
    close $in_r; close $out_w;
    $in_w->autoflush(1);
    my $self = bless { pid => $pid, log => $log, mode => $mode, sock => $sock, in => $in_w, out => $out_r, obuf => '' }, __PACKAGE__;
    if ($mode ne 'stdio') {
        $self->wait_log(qr/listening on (\S+)/, 10) or die "bus did not start: " . $self->log_text;
        my ($addr) = $self->log_text =~ /listening on tcp:\/\/([\d.]+:\d+)/;
        $self->{tcp} = $addr;
    }
    $self->wait_log(qr/daemon: ready/, 10) unless $a{no_wait};
    return $self;
}

sub log_text { my $s = shift; open my $fh, '<', $s->{log} or return ''; local $/; my $t = <$fh>; $t // '' }
sub wait_log { my ($s, $re, $t) = @_; return wait_until(sub { $s->log_text =~ $re }, $t // 5) }
sub count_log { my ($s, $re) = @_; my @m = $s->log_text =~ /$re/g; return scalar @m }

sub alive { my $s = shift; return 0 if defined $s->{status}; my $r = waitpid($s->{pid}, WNOHANG); if ($r == $s->{pid}) { $s->{status} = $?; return 0 } return 1 }
sub wait_exit {
    my ($s, $t) = @_;
    wait_until(sub { !$s->alive }, $t // 10);
    return defined $s->{status} ? $s->{status} : undef;
}
sub signal { my ($s, $sig) = @_; kill $sig, $s->{pid} }
sub stop {
    my $s = shift;
    return $s->{status} unless $s->alive;
    kill 'TERM', $s->{pid};
    my $st = $s->wait_exit(15);
    unless (defined $st) { kill 'KILL', $s->{pid}; $st = $s->wait_exit(5) }
    return $st;
}
sub DESTROY { my $s = shift; if ($s->{pid} && !defined $s->{status}) { kill 'KILL', $s->{pid}; waitpid($s->{pid}, 0) } }

# stdio: send raw bytes; read lines from stdout
sub send_raw { my ($s, $data) = @_; my $fh = $s->{in}; print $fh $data }
sub close_stdin { my $s = shift; close $s->{in} }
sub read_line { my ($s, $t) = @_; return _read_line($s->{out}, \$s->{obuf}, $t) }
sub read_lines { my ($s, $n, $t) = @_; my @l; while (@l < $n) { my $x = $s->read_line($t) // last; push @l, $x } @l }

sub _read_line {
    my ($fh, $buf, $t) = @_;
    my $end = time + ($t // 5);
    while (1) {
        my $i = index($$buf, "\n");
        if ($i >= 0) { return substr($$buf, 0, $i + 1, '') =~ s/\n\z//r }
        my $left = $end - time; return undef if $left <= 0;
        my $rin = ''; vec($rin, fileno($fh), 1) = 1;
        my $n = select(my $rout = $rin, undef, undef, $left);
        next if $n <= 0;
        my $r = sysread($fh, $$buf, 65536, length $$buf);
        return undef unless $r;    # EOF
    }
}

sub connect {
    my $s = shift;
    my $c = $s->{mode} eq 'unix'
        ? IO::Socket::UNIX->new(Type => Socket::SOCK_STREAM(), Peer => $s->{sock})
        : IO::Socket::IP->new(PeerHost => (split /:/, $s->{tcp})[0], PeerPort => (split /:/, $s->{tcp})[1]);
    die "connect failed: $!" unless $c;
    $c->autoflush(1);
    return BusTest::Client->new($c);
}

package BusTest::Client;
sub new { my ($cl, $sock) = @_; bless { s => $sock, buf => '' }, $cl }
sub send { my ($c, @msgs) = @_; my $s = $c->{s}; print $s map { (ref $_ ? BusTest::jenc($_) : $_) . "\n" } @msgs }
sub send_raw { my ($c, $d) = @_; my $s = $c->{s}; local $SIG{PIPE} = 'IGNORE'; print $s $d }
sub read_line { my ($c, $t) = @_; return BusTest::_read_line($c->{s}, \$c->{buf}, $t) }
sub read_msg { my ($c, $t) = @_; my $l = $c->read_line($t); return defined $l ? BusTest::jdec($l) : undef }
sub read_msgs { my ($c, $n, $t) = @_; my @m; while (@m < $n) { my $x = $c->read_msg($t) // last; push @m, $x } @m }
sub is_closed {    # true if the daemon closed the connection (EOF) within $t
    my ($c, $t) = @_;
    my $end = Time::HiRes::time() + ($t // 5);
    while (Time::HiRes::time() < $end) {
        my $rin = ''; vec($rin, fileno($c->{s}), 1) = 1;
        next unless select(my $r = $rin, undef, undef, 0.05) > 0;
        my $n = sysread($c->{s}, my $d, 65536);
        return 1 if !defined $n || $n == 0;
        $c->{buf} .= $d;
    }
    return 0;
}
sub close { my $c = shift; close $c->{s} }
sub sock { $_[0]{s} }
1;
